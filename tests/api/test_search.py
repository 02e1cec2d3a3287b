"""POST /search: input checks (answered before the engine runs), then the engine for the team."""

import pytest

from lessons.search.types import MAX_QUERY_CHARS
from lessons.services.lessons import lesson_create
from lessons.services.memories import memory_create

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize(
    "body, field, words",
    [
        ({}, "query", "required"),
        ({"query": ""}, "query", "at least 1"),
        ({"query": "x" * 100_000}, "query", f"at most {MAX_QUERY_CHARS}"),
        ({"query": "rls", "limit": -1}, "limit", "greater than or equal to 1"),
        ({"query": "rls", "limit": 101}, "limit", "less than or equal to 100"),
        ({"query": "rls", "mode": "psychic"}, "mode", "hybrid"),
        ({"query": "rls", "kind": "recipes"}, "kind", "lessons"),
        ({"query": "rls", "fusion": "average"}, "fusion", "weighted"),
        ({"query": "rls", "filters": {"min_importance": 0}}, "filters.min_importance", "greater"),
        ({"query": "rls", "filters": {"colour": "red"}}, "filters.colour", "not permitted"),
        ({"query": "rls", "filters": {"statuses": []}}, "filters.statuses", "at least 1"),
        ({"query": "rls", "filters": {"since": "2025-01-02T00:00:00Z", "until": "2025-01-01T00:00:00Z"}},
         "filters.until", "after since"),
        ({"query": "rls", "weights": {"semantic": 2, "keyword": 0.1, "quality": 0.1}}, "weights.semantic", "1"),
    ],
)
def test_bad_search_input_is_422_naming_the_field(api, body, field, words):
    response = api.post("/search", body)
    assert response.status_code == 422, response.content
    errors = response.json()["errors"]
    assert field in [error["field"] for error in errors]
    message = next(error["message"] for error in errors if error["field"] == field)
    assert words in message


@pytest.mark.parametrize("raw", ['{"query": "rls",', "{'query': 'rls'}", "query=rls", "\xff\xfe"])
def test_malformed_json_is_400_naming_the_body(api, raw):
    response = api.post("/search", raw)
    assert response.status_code == 400
    assert response.json()["errors"][0]["field"] == "body"
    assert "JSON" in response.json()["detail"]


def test_a_json_array_is_not_a_search(api):
    response = api.post("/search", [1, 2])
    assert response.status_code == 422


def test_search_finds_the_teams_lesson_by_meaning_and_never_another_teams(
    api, team, other_team, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True):  # embedding runs after commit
        ours, theirs = _rls_lessons(team, other_team)
    response = api.post("/search", {"query": "database security for SaaS tenants", "limit": 5})
    assert response.status_code == 200, response.content
    ids = [hit["id"] for hit in response.json()["results"]]
    assert ids[0] == ours.pk
    assert theirs.pk not in ids
    assert all("embedding" not in hit["fields"] for hit in response.json()["results"])


def _rls_lessons(team, other_team):
    ours = lesson_create(
        team=team,
        title="Enable row level security on every multi-tenant table",
        description="Without RLS one tenant could read another tenant's rows through the API.",
    )
    lesson_create(team=team, title="Debounce search inputs in React forms", category="frontend")
    theirs = lesson_create(
        team=other_team,
        title="Enable row level security on every multi-tenant table",
        description="Without RLS one tenant could read another tenant's rows through the API.",
    )
    return ours, theirs


def test_search_memories_with_filters_and_explain(api, team, other_team, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        mine = memory_create(team=team, content="Had a panic attack on the crowded train", emotions=["panic"])
        memory_create(team=team, content="Started learning the guitar", categories=["interest"])
        memory_create(team=other_team, content="Had a panic attack on the crowded train", emotions=["panic"])
    response = api.post(
        "/search",
        {
            "query": "anxiety on public transport",
            "kind": "memories",
            "explain": True,
            "filters": {"emotions": ["panic"]},
        },
    )
    assert response.status_code == 200, response.content
    results = response.json()["results"]
    assert [hit["id"] for hit in results] == [mine.pk]
    assert results[0]["explanation"] is not None


def test_a_lesson_stored_through_the_api_is_then_found_by_search(api, django_capture_on_commit_callbacks):
    # The README's curl example, in a test: store, then search by meaning.
    with django_capture_on_commit_callbacks(execute=True):
        created = api.post(
            "/lessons",
            {
                "title": "Enable row level security on every multi-tenant table",
                "description": "Without RLS one tenant could read another tenant's rows through the API.",
                "recommendation": "Turn RLS on in the migration that creates the table.",
                "category": "security",
                "tech_stacks": ["postgresql", "supabase"],
                "confidence": 0.9,
            },
        )
        api.post("/lessons", {"title": "Prefer CSS grid for page layout", "category": "frontend"})
    assert created.status_code == 201
    response = api.post("/search", {"query": "database security for SaaS tenants", "limit": 5, "explain": True})
    assert response.status_code == 200, response.content
    results = response.json()["results"]
    assert results[0]["id"] == created.json()["id"]
    assert results[0]["explanation"]
    # Label feedback, in the API's words: the lesson carries no tags, so it shares none and its
    # score is its weighted score over 1 + weight.
    labels = results[0]["explanation"]["labels"]
    assert labels["value"] == 0.0 and labels["shared"] == [] and labels["top"] == 3
    assert results[0]["score"] == pytest.approx(results[0]["explanation"]["weighted_score"] / (1 + labels["weight"]),
                                                abs=2e-4)
    assert "labels" not in api.post("/search", {"query": "database security", "mode": "text", "explain": True}
                                    ).json()["results"][0]["explanation"]


def test_a_body_over_the_upload_limit_is_413_saying_the_limit(api, settings):
    response = api.post("/search", {"query": "x", "context": "y" * (settings.DATA_UPLOAD_MAX_MEMORY_SIZE + 1)})
    assert response.status_code == 413
    assert f"{settings.DATA_UPLOAD_MAX_MEMORY_SIZE:,}" in response.json()["detail"]


def test_filter_terms_are_trimmed_as_stored_ones_are(api, team):
    lesson_create(team=team, title="Rotate the service key", tags=["secret"], category="security")
    for filters in ({"tags": [" secret "]}, {"categories": [" Security "]}):
        body = api.post("/search", {"query": "service key", "mode": "text", "filters": filters}).json()
        assert [hit["fields"]["title"] for hit in body["results"]] == ["Rotate the service key"], filters
        assert body["fallback"] is None
    blank = api.post("/search", {"query": "service key", "filters": {"tags": ["  "]}})
    assert blank.status_code == 422 and blank.json()["errors"][0]["field"] == "filters.tags.0"


def test_a_hits_timestamps_are_written_as_the_lesson_and_memory_endpoints_write_them(api, team):
    lesson = lesson_create(team=team, title="Retry idempotent requests with backoff")
    memory = memory_create(team=team, content="Went hiking with Ana", occurred_at="2024-05-01T09:30:15.123456+02:00")
    hit = api.post("/search", {"query": "retry backoff", "mode": "text"}).json()["results"][0]
    stored = api.get(f"/lessons/{lesson.pk}").json()
    assert hit["id"] == lesson.pk
    assert (hit["fields"]["created_at"], hit["fields"]["updated_at"]) == (stored["created_at"], stored["updated_at"])
    assert stored["created_at"].endswith("Z")
    memory_hit = api.post("/search", {"query": "hiking", "kind": "memories", "mode": "text"}).json()["results"][0]
    assert memory_hit["fields"]["occurred_at"] == api.get(f"/memories/{memory.pk}").json()["occurred_at"]
    assert memory_hit["fields"]["occurred_at"] == "2024-05-01T07:30:15.123Z"


def test_text_typed_in_either_unicode_form_is_one_word(api, team):
    import unicodedata

    decomposed, composed = (unicodedata.normalize(form, "crème brûlée") for form in ("NFD", "NFC"))
    assert decomposed != composed
    created = api.post("/lessons", {"title": f"Parse {decomposed} recipes with a real parser"})
    assert created.json()["title"] == f"Parse {composed} recipes with a real parser"  # stored in NFC
    for typed in (composed, decomposed):
        found = api.post("/search", {"query": typed, "mode": "text"}).json()
        assert [hit["id"] for hit in found["results"]] == [created.json()["id"]], typed
        assert api.get("/lessons", {"text": typed}).json()["count"] == 1


@pytest.mark.parametrize("kind, filters, field", [
    ("memories", {"tags": ["rls"]}, "filters.tags"),
    ("memories", {"statuses": ["proposed"]}, "filters.statuses"),
    ("lessons", {"people": ["Ana"]}, "filters.people"),
    ("lessons", {"min_importance": 5}, "filters.min_importance"),
])
def test_a_filter_the_kind_does_not_have_is_refused_not_ignored(api, kind, filters, field):
    response = api.post("/search", {"query": "x", "kind": kind, "filters": filters})
    assert response.status_code == 422
    other = "lessons" if kind == "memories" else "memories"
    assert response.json()["errors"] == [
        {"field": field, "message": f"filters {other} only; this search is of {kind}"}
    ]


def test_a_filter_of_the_other_kind_left_at_its_default_is_fine(api):
    # a client that always sends every filter, empty, must not be refused
    body = {"query": "x", "kind": "memories", "filters": {"tags": [], "statuses": ["confirmed"], "phase": None}}
    assert api.post("/search", body).status_code == 200
