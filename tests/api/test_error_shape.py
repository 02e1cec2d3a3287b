"""Every error under /api/ has the one JSON shape, also those no endpoint writes."""

import pytest

from lessons.api.request_body import takes_body
from lessons.models import Memory
from lessons.services.memories import memory_create, memory_update
from tests.factories import LessonFactory, MemoryFactory

pytestmark = pytest.mark.django_db


def test_a_path_the_api_does_not_have_is_a_json_404(api):
    response = api.get("/no-such-thing")
    assert response.status_code == 404
    assert response["Content-Type"].startswith("application/json")
    assert response.json() == {
        "detail": "no endpoint at /api/v1/no-such-thing; the API's paths are in /api/v1/openapi.json",
        "errors": [],
    }


def test_a_method_an_endpoint_does_not_take_is_a_json_405_that_says_which_it_does(api):
    response = api.client.put("/api/v1/search", data="{}", content_type="application/json")
    assert response.status_code == 405
    assert response.json()["detail"] == "PUT is not allowed on /api/v1/search; use POST"
    assert response["Allow"] == "POST"


def test_an_id_that_does_not_exist_keeps_its_own_answer(api):
    response = api.get("/lessons/999999")
    assert response.status_code == 404
    assert response.json()["detail"] != "" and "no endpoint" not in response.json()["detail"]


def test_a_404_for_an_id_in_the_path_names_that_parameter(api, team, other_team):
    # the answer said "lesson 5 does not exist" with "errors": [], where every other error names its field
    theirs = LessonFactory(team=other_team)
    memory = memory_create(team=team, content="Ran the canal path with Ana")
    cases = [
        (api.get(f"/lessons/{theirs.pk}"), "lesson_id", f"lesson {theirs.pk} does not exist"),
        (api.patch("/lessons/999999", {"confidence": 0.2}), "lesson_id", "lesson 999999 does not exist"),
        (api.get("/memories/999999/versions"), "memory_id", "memory 999999 does not exist"),
        (api.post(f"/memories/{memory.pk}/versions/999999/restore"), "version_id",
         f"memory {memory.pk} has no earlier version 999999"),
    ]
    for response, field, message in cases:
        assert response.status_code == 404
        assert response.json() == {"detail": f"{field}: {message}", "errors": [{"field": field, "message": message}]}


@pytest.mark.parametrize("number", ["NaN", "Infinity", "-Infinity"])
def test_a_number_that_is_not_finite_is_refused_as_such(api, number):
    response = api.post("/lessons", '{"title": "x", "confidence": %s}' % number)
    assert response.status_code == 422
    assert response.json()["errors"] == [{"field": "confidence", "message": "Input should be a finite number"}]


@pytest.mark.parametrize("path, body, field", [
    ("/lessons", '{"title": "x", "frequency": 1e20}', "frequency"),
    ("/memories", '{"content": "x", "importance": -1e30}', "importance"),
    ("/search", '{"query": "x", "limit": 1e19}', "limit"),
])
def test_a_number_too_large_for_an_integer_is_not_called_a_string(api, path, body, field):
    # pydantic said "Unable to parse input string as an integer, exceeded maximum size" of a number
    response = api.post(path, body)
    assert response.status_code == 422
    assert response.json()["errors"] == [{"field": field, "message": "Input should be an integer of a size this "
                                                                      "field takes; this number is far too large"}]


@pytest.mark.parametrize("path, body, field", [
    ("/lessons", '{"title": "x", "frequency": true}', "frequency"),
    ("/lessons", '{"title": "x", "confidence": false}', "confidence"),
    ("/memories", '{"content": "x", "importance": true}', "importance"),
    ("/search", '{"query": "x", "limit": true}', "limit"),
])
def test_true_and_false_are_not_numbers(api, path, body, field):
    response = api.post(path, body)  # pydantic read them as 1 and 0: "frequency": true stored 1
    assert response.status_code == 422
    assert response.json()["errors"] == [{"field": field, "message": "expected a number, not true or false"}]
    assert api.post("/lessons", '{"title": "x", "frequency": 2, "confidence": 1}').status_code == 201


def test_an_empty_body_is_a_400_not_a_list_of_missing_fields(api):
    response = api.client.post("/api/v1/lessons", data="", content_type="application/json")
    assert response.status_code == 400
    assert response.json()["errors"] == [{"field": "body", "message": "the body is empty; send a JSON object"}]
    assert api.post("/lessons", {}).status_code == 422  # an object without its fields stays a 422


@pytest.mark.parametrize("path, params, field", [
    ("/lessons", {"tech_stack": ""}, "tech_stack"),
    ("/lessons", {"category": " "}, "category"),
    ("/memories", {"emotion": ""}, "emotion"),
])
def test_a_blank_filter_value_is_refused_like_a_blank_term_elsewhere(api, path, params, field):
    response = api.get(path, params)
    assert response.status_code == 422
    assert response.json()["errors"][0]["field"] == field


@pytest.mark.parametrize("method, path, given, field", [
    ("post", "/search", {"query": "tenant data", "project_type": "SaaS!"}, "project_type"),
    ("get", "/lessons/relevant", {"project_type": "SaaS!"}, "project_type"),
    ("get", "/lessons/patterns", {"feature": "Auth", "project_type": "SaaS!"}, "project_type"),
    ("get", "/lessons", {"project_type": "SaaS!"}, "project_type"),
    ("get", "/lessons", {"tech_stack": "next!"}, "tech_stack"),
    ("get", "/lessons", {"tag": ["caching", "multi tenant?"]}, "tag"),
    # these three answered 200 with nothing
    ("get", "/lessons", {"category": "Bad!"}, "category"),
    ("get", "/memories", {"category": "Bad!"}, "category"),
    ("get", "/memories", {"emotion": ["calm", "Bad!"]}, "emotion"),
])
def test_a_term_no_lesson_can_store_is_refused_not_matched_against_nothing(api, method, path, given, field):
    # a project type went through unchecked (200, matching nothing) where a tech stack was refused
    response = getattr(api, method)(path, given)
    assert response.status_code == 422, response.content
    [error] = response.json()["errors"]
    assert error["field"] == field and error["message"].startswith("Use ASCII letters, digits")



@pytest.mark.parametrize("path", [
    "/lessons/{lesson}.0", "/lessons/+{lesson}", "/lessons/%20{lesson}", "/lessons/{lesson}_0",
    "/memories/{memory}.0", "/memories/{memory}.0/versions", "/lessons/{lesson}.0/merge",
])
def test_an_id_in_a_path_is_digits_only_not_anything_pydantic_reads_as_a_number(api, team, path):
    lesson, memory = LessonFactory(team=team), MemoryFactory(team=team)
    url = path.format(lesson=lesson.pk, memory=memory.pk)
    response = api.post(url, {"merge_ids": [lesson.pk + 1]}) if url.endswith("merge") else api.get(url)
    assert response.status_code == 422
    field = "lesson_id" if url.startswith("/lessons") else "memory_id"
    assert response.json()["errors"] == [{"field": field, "message": "Input should be an id written in digits"}]
    assert api.get(f"/lessons/{lesson.pk}").status_code == 200  # the digits alone still name it


@pytest.mark.parametrize("moment", ["2024-01-01T00:00:00+16:00", "2024-01-01T00:00:00-23:59"])
def test_an_offset_the_database_cannot_store_is_converted_to_utc(api, moment):
    created = api.post("/memories", {"content": "Late call with the Auckland office", "occurred_at": moment})
    assert created.status_code == 201, created.content
    stored = created.json()["occurred_at"]
    assert stored.endswith("Z") and stored == api.get(f"/memories/{created.json()['id']}").json()["occurred_at"]
    searched = api.post("/search", {"query": "call", "kind": "memories", "filters": {"since": moment}})
    assert searched.status_code == 200, searched.content


NUMBER_MOMENT = ("expected an ISO 8601 date-time such as 2024-05-01T09:30:00+02:00 (or a date, 2024-05-01); "
                 "{} is a number, which would be read as seconds since 1970")


@pytest.mark.parametrize("given, shown", [(2024, "2024"), ("2024", '"2024"'), ("20240501", '"20240501"'),
                                          (1.7e9, "1700000000.0")])
def test_a_number_for_a_moment_is_refused_not_read_as_seconds_since_1970(api, team, given, shown):
    # "occurred_at": 2024 (or "2024") was stored as 1970-01-01T00:33:44, where the imports refuse it
    response = api.post("/memories", {"content": "We moved to Leipzig", "occurred_at": given})
    assert response.status_code == 422
    assert response.json()["errors"] == [{"field": "occurred_at", "message": NUMBER_MOMENT.format(shown)}]
    memory = memory_create(team=team, content="Started the pottery course")
    response = api.patch(f"/memories/{memory.pk}", {"occurred_at": given})
    assert response.status_code == 422 and response.json()["errors"][0]["field"] == "occurred_at"
    memory.refresh_from_db()
    assert (memory.occurred_at, Memory.objects.filter(team=team).count()) == (None, 1)
    searched = api.post("/search", {"query": "x", "kind": "memories", "filters": {"until": given}})
    assert searched.status_code == 422
    assert searched.json()["errors"] == [{"field": "filters.until", "message": NUMBER_MOMENT.format(shown)}]


def test_a_moment_as_text_and_a_date_alone_are_still_read(api):
    for given, stored in (("2024-05-01", "2024-05-01T00:00:00Z"),
                          ("2024-05-01T09:30:00+02:00", "2024-05-01T07:30:00Z")):
        created = api.post("/memories", {"content": f"Moved on {given}", "occurred_at": given})
        assert created.status_code == 201 and created.json()["occurred_at"] == stored
    listed = api.get("/memories", {"since": "2024"})  # a query string's moment is text too
    assert listed.status_code == 422
    assert listed.json()["errors"] == [{"field": "since", "message": NUMBER_MOMENT.format('"2024"')}]
    assert api.get("/memories", {"since": "2024-04-30"}).json()["count"] == 2


def test_a_search_from_past_year_9999_in_utc_is_refused_by_name(api):
    response = api.post("/search", {"query": "x", "kind": "memories",
                                    "filters": {"since": "9999-12-31T23:00:00-05:00"}})
    assert response.status_code == 422
    assert response.json()["errors"] == [{"field": "filters.since",
                                          "message": "Use a moment between years 1 and 9999 in UTC."}]


@pytest.mark.parametrize("method, path, body, field", [
    ("get", "/memories", {"person": "   "}, "person"),
    ("get", "/memories", {"person": ""}, "person"),
    # no letter or digit: nothing is left of the name, and the empty filter answered every memory
    ("get", "/memories", {"person": "-"}, "person"),
    ("get", "/memories", {"person": "\u200b"}, "person"),
    # the search's filter and the by-person lookup matched nothing without saying why
    ("post", "/search", {"query": "x", "kind": "memories", "filters": {"people": ["-"]}}, "filters.people.0"),
    ("get", "/memories/by-person", {"name": "-"}, "name"),
    # a blank text listed every row; a blank external id matched none, without a word
    ("get", "/memories", {"text": "  "}, "text"),
    ("get", "/lessons", {"text": ""}, "text"),
    ("get", "/memories", {"external_id": " "}, "external_id"),
    ("get", "/lessons", {"external_id": ""}, "external_id"),
    ("get", "/lessons/patterns", {"feature": "  "}, "feature"),
    ("get", "/lessons/relevant", {"project_type": " "}, "project_type"),
    ("get", "/lessons/relevant", {"phase": " "}, "phase"),
    ("post", "/search", {"query": "x", "project_type": "   "}, "project_type"),
    ("post", "/search", {"query": "x", "filters": {"phase": "  "}}, "filters.phase"),
    ("post", "/search", {"query": "x", "filters": {"phase": "someday"}}, "filters.phase"),
])
def test_a_blank_or_unknown_value_is_refused_naming_its_own_field(api, method, path, body, field):
    response = api.get(path, body) if method == "get" else api.post(path, body)
    assert response.status_code == 422, response.content
    assert [error["field"] for error in response.json()["errors"]] == [field]


def test_a_known_phase_and_a_trimmed_feature_still_answer(api):
    assert api.post("/search", {"query": "x", "filters": {"phase": "Build"}}).status_code == 200
    assert api.get("/lessons/patterns", {"feature": "  Authentication "}).status_code == 200


@pytest.mark.parametrize("kind, body", [
    ("lessons", {"title": "Pin the base image digest", "external_id": "raced-1"}),
    ("memories", {"content": "Met Ana at the gym", "external_id": "raced-1"}),
])
def test_two_writers_racing_for_one_external_id_the_second_hears_409_naming_it(api, monkeypatch, kind, body):
    # The race itself: both pass the services' check before either has written (simulated by
    # skipping the check), so the database's unique constraint is what refuses the second.
    from lessons.models import Lesson, Memory

    monkeypatch.setattr(Lesson, "external_id_peers", lambda self: None)
    monkeypatch.setattr(Memory, "external_id_peers", lambda self: None)
    assert api.post(f"/{kind}", body).status_code == 201
    second = api.post(f"/{kind}", body)
    assert second.status_code == 409
    assert second.json()["errors"] == [
        {"field": "external_id", "message": "another request stored a row with this external_id just now"}
    ]


def test_the_openapi_document_declares_the_409_of_every_write_that_takes_an_external_id(api):
    paths = api.client.get("/api/v1/openapi.json").json()["paths"]
    for path, method in [("/api/v1/lessons", "post"), ("/api/v1/lessons/{lesson_id}", "patch"),
                         ("/api/v1/memories", "post"), ("/api/v1/memories/{memory_id}", "patch"),
                         ("/api/v1/lessons/propose", "post")]:
        assert "409" in paths[path][method]["responses"], (path, method)


def test_head_is_answered_wherever_get_is_with_the_headers_and_no_body(api, anonymous):
    got = anonymous.client.get("/api/v1/health")
    head = anonymous.client.head("/api/v1/health")
    assert head.status_code == got.status_code == 200
    assert head.content == b"" and head["Content-Type"] == got["Content-Type"]
    assert int(head["Content-Length"]) == len(got.content)
    assert api.client.head("/api/v1/lessons").status_code == 200
    refused = api.client.head("/api/v1/search")  # a POST endpoint
    assert refused.status_code == 405 and refused["Allow"] == "POST"
    assert api.client.delete("/api/v1/health")["Allow"] == "GET, HEAD"


@pytest.mark.parametrize("path, params, name", [
    ("/lessons/relevant", {"limt": "2"}, "limt"),
    ("/lessons/patterns", {"feature": "Authentication", "tech_stak": "nextjs"}, "tech_stak"),
    ("/memories/by-person", {"name": "Jonas", "limt": "1"}, "limt"),
    ("/lessons", {"limit": "5", "colour": "red"}, "colour"),
    ("/memories/friends", {"sort": "name"}, "sort"),
])
def test_a_misspelt_query_parameter_is_refused_by_name_not_ignored(api, path, params, name):
    response = api.get(path, params)
    assert response.status_code == 422
    [error] = response.json()["errors"]
    assert error["field"] == name and error["message"].startswith(f"not a parameter of /api/v1{path}; it takes ")
    known = {key: value for key, value in params.items() if key != name}
    assert api.get(path, {**known, "team": "acme"}).status_code == 200  # limit, team (the key's own): fine


def test_a_detail_endpoint_takes_no_query_parameters(api, team):
    lesson = LessonFactory(team=team)
    response = api.get(f"/lessons/{lesson.pk}", {"fields": "title"})
    assert response.status_code == 422 and response.json()["errors"][0]["field"] == "fields"
    # the message said "it takes " and stopped
    assert response.json()["errors"][0]["message"].endswith("; it takes no query parameters")
    assert api.get(f"/lessons/{lesson.pk}").status_code == 200


def test_a_validators_own_words_come_without_pydantics_prefix(api):
    response = api.post("/search", {"query": "x", "filters": {"phase": "deploy"}})
    [error] = response.json()["errors"]
    assert error["field"] == "filters.phase" and error["message"].startswith("unknown phase 'deploy'; use one of")


def test_a_blank_query_is_refused_like_an_empty_one(api):
    for body in ({"query": ""}, {"query": "   "}):
        response = api.post("/search", body)  # "   " used to answer the ten most recent rows
        assert response.status_code == 422 and response.json()["errors"][0]["field"] == "query"
    assert api.post("/memories/search-versions", {"query": " \t "}).status_code == 422


@pytest.mark.parametrize("body, field", [
    ({"query": "family trip", "kind": "memories", "tech_stack": ["nextjs"]}, "tech_stack"),
    ({"query": "family trip", "kind": "memories", "project_type": "saas"}, "project_type"),
])
def test_a_lesson_callers_context_on_a_memory_search_is_refused_not_ignored(api, body, field):
    response = api.post("/search", body)
    assert response.status_code == 422
    assert response.json()["errors"] == [{"field": field, "message": "lessons only; this search is of memories"}]


@pytest.mark.parametrize("body, message", [
    ('{"title": ' + "[" * 5000 + "]" * 5000 + "}", "body: the JSON is nested too deeply to read"),
    ('{"title": "x", "frequency": ' + "9" * 5000 + "}", "body: a number in the JSON has more than 4,300 digits"),
])
def test_json_python_cannot_read_is_a_400_naming_the_body_in_plain_words(api, body, message):
    response = api.post("/lessons", body)
    assert response.status_code == 400
    assert response.json()["detail"].startswith(message)
    assert response.json()["errors"][0]["field"] == "body" and "sys." not in response.json()["detail"]


def test_a_key_given_twice_is_a_400_naming_it_and_nothing_changes(api, team):
    """Python's reader kept the last of two equal keys: the lesson took confidence 0.1 without a word."""
    lesson = LessonFactory(team=team, confidence=0.9)
    for method, path, body in [
        ("patch", f"/lessons/{lesson.id}", '{"confidence": 0.9, "title": "T", "confidence": 0.1}'),
        ("post", "/lessons", '{"title": "New", "description": "d", "title": "Newer"}'),
        ("post", "/search", '{"query": "retries", "filters": {"tags": ["a"], "tags": ["b"]}}'),
    ]:
        response = getattr(api, method)(path, body)
        assert response.status_code == 400, (path, response.content)
        detail = response.json()["detail"]
        assert detail.startswith('body: the key "') and "appears twice in one object" in detail
    assert api.patch(f"/lessons/{lesson.id}", '{"confidence": 0.1}').status_code == 200  # once is fine
    lesson.refresh_from_db()
    assert lesson.confidence == 0.1 and lesson.title != "T"
    assert not type(lesson).objects.filter(title__startswith="New").exists()


@pytest.mark.parametrize("invisible", ["\u200b", "\u200d", "\u00ad", "\u2063", "\u180e"])
def test_a_title_or_query_of_only_invisible_characters_is_as_blank_as_spaces(api, invisible):
    created = api.post("/lessons", {"title": invisible})
    assert created.status_code == 422 and created.json()["errors"][0]["field"] == "title"
    searched = api.post("/search", {"query": invisible})
    assert searched.status_code == 422 and searched.json()["errors"][0]["field"] == "query"
    assert api.get("/memories/by-person", {"name": invisible}).status_code == 422


def test_invisible_characters_in_a_query_or_an_external_id_are_not_read(api):
    lesson = api.post("/lessons", {"title": "Rotate the password", "external_id": "\u200b"}).json()
    assert lesson["external_id"] is None
    found = api.post("/search", {"query": "pass\u200bword", "mode": "text"}).json()
    assert [hit["id"] for hit in found["results"]] == [lesson["id"]] and found["fallback"] is None


@pytest.mark.parametrize("body", [
    {"query": "tenant data", "mode": "semantic", "weights": {"semantic": 0, "keyword": 1, "quality": 0}},
    {"query": "tenant data", "mode": "text", "weights": {"semantic": 1, "keyword": 0, "quality": 0}},
])
def test_weights_that_give_the_modes_own_parts_nothing_are_refused(api, body):
    # They used to be renormalised over nothing: the parts shared equally, and the ranking came
    # from parts the caller had set to 0.
    response = api.post("/search", body)
    assert response.status_code == 422
    [error] = response.json()["errors"]
    assert error["field"] == "weights" and error["message"].startswith(f"{body['mode']} mode scores by")


def test_semantic_mode_takes_a_keyword_weight_for_the_callers_tech_stack(api):
    body = {"query": "tenant data", "mode": "semantic", "tech_stack": ["nextjs"],
            "weights": {"semantic": 0, "keyword": 1, "quality": 0}, "explain": True}
    response = api.post("/search", body)
    assert response.status_code == 200, response.content


@pytest.mark.parametrize("path, params, name", [
    ("/lessons", {"text": ["cache", "redis"]}, "text"),
    ("/lessons", {"external_id": ["a", "b"]}, "external_id"),
    ("/lessons", {"limit": ["5", "10"]}, "limit"),
    ("/lessons", {"offset": ["0", "0"]}, "offset"),
    ("/memories", {"min_importance": ["3", "5"]}, "min_importance"),
    ("/memories/events", {"days": ["7", "30"]}, "days"),
    ("/lessons/patterns", {"feature": ["Auth", "Search"]}, "feature"),
    ("/lessons/duplicates", {"threshold": ["0.1", "0.2"]}, "threshold"),
])
def test_a_repeated_parameter_that_takes_one_value_is_refused_not_the_last_kept(api, path, params, name):
    """`text=cache&text=redis` answered as `text=redis`, without a word."""
    response = api.get(path, params)
    assert response.status_code == 422, response.content
    assert response.json()["errors"] == [{"field": name, "message": "given 2 times; it takes one value"}]


def test_a_write_takes_no_query_parameters_but_the_team(api, team):
    # a field put in the URL was ignored: the PATCH answered 200 and changed nothing
    lesson = LessonFactory(team=team, confidence=0.4)
    patched = api.client.patch(f"/api/v1/lessons/{lesson.pk}?confidence=0.1", "{}", content_type="application/json")
    assert patched.status_code == 422
    [error] = patched.json()["errors"]
    assert error["field"] == "confidence"
    assert error["message"].endswith("it takes no query parameters; send the fields in the JSON body")
    searched = api.client.post("/api/v1/search?limit=500", '{"query": "retries"}', content_type="application/json")
    assert searched.status_code == 422 and searched.json()["errors"][0]["field"] == "limit"
    assert api.client.delete(f"/api/v1/lessons/{lesson.pk}?force=1").status_code == 422
    lesson.refresh_from_db()
    assert lesson.confidence == 0.4  # nothing written, nothing deleted
    own_team = api.client.patch(f"/api/v1/lessons/{lesson.pk}?team={team.slug}", '{"confidence": 0.9}',
                                content_type="application/json")
    assert own_team.status_code == 200 and own_team.json()["confidence"] == 0.9


def test_a_write_that_takes_no_body_refuses_one_and_changes_nothing(api, team):
    # `{"status": "rejected"}` sent to accept answered 200 and confirmed the proposal: the body was ignored
    proposal = LessonFactory(team=team, status="proposed")
    accept = f"/api/v1/lessons/{proposal.pk}/accept"
    refused = api.client.post(accept, '{"status": "rejected"}', content_type="application/json")
    assert refused.status_code == 422, refused.content
    assert refused.json()["errors"] == [
        {"field": "status", "message": f"not a field of POST {accept}; it takes no body"}]
    for body in ("[1]", "null", "reject it", '{"a": 1, "a": 2}', "[" * 5000):
        response = api.client.post(f"/api/v1/lessons/{proposal.pk}/reject", body, content_type="application/json")
        assert response.status_code == 422, (body[:20], response.content)
        assert response.json()["errors"][0]["field"] == "body"
    proposal.refresh_from_db()
    assert proposal.status == "proposed"
    # the query string's message no longer sends the caller to a body the endpoint does not read
    in_url = api.client.post(f"{accept}?status=rejected")
    assert in_url.json()["errors"][0]["message"].endswith("it takes no query parameters")
    # no body, or {} (what some clients send on every POST), is what it takes
    assert api.client.post(accept, "{}", content_type="application/json").json()["status"] == "confirmed"

    memory = memory_create(team=team, content="Maria works as a nurse")
    memory_update(memory=memory, content="Maria became a midwife")
    first = Memory.objects.get(current_version=memory)
    restore = f"/api/v1/memories/{memory.pk}/versions/{first.pk}/restore"
    assert api.client.post(restore, '{"version": 1}', content_type="application/json").status_code == 422
    deleted = api.client.delete(f"/api/v1/memories/{memory.pk}", '{"keep": true}', content_type="application/json")
    assert deleted.status_code == 422 and deleted.json()["errors"][0]["field"] == "keep"
    memory.refresh_from_db()
    assert (memory.content, memory.version) == ("Maria became a midwife", 2)  # neither restored nor deleted
    assert api.client.post(restore).json()["content"] == "Maria works as a nurse"
    assert api.client.delete(f"/api/v1/memories/{memory.pk}").status_code == 204


def test_every_write_without_a_body_schema_is_known_to_take_no_body():
    """`takes_body` reads a view's signature; ninja decides from the same signature which
    parameters are the body. They agree on every operation, so the check cannot miss one."""
    from memory_site.api import api as project_api

    seen = 0
    for _, router in project_api._routers:
        for operations in router.path_operations.values():
            for operation in operations.operations:
                body = [model for model in operation.models if model.__ninja_param_source__ == "body"]
                assert takes_body(operation.view_func) == bool(body), operation.view_func.__name__
                seen += 1
    assert seen >= 30


def _database_error(error_class, pg_error):
    error = error_class(str(pg_error))
    error.__cause__ = pg_error  # as Django raises it: psycopg's error is the cause
    return error


def test_a_request_the_database_ends_in_a_deadlock_is_a_503_to_send_again_not_an_outage(api, monkeypatch):
    """A deadlock (or a serialization failure) was answered "the database is unavailable", which
    tells an agent to wait for an outage to pass; nothing was kept and the request can be sent again."""
    from django.db import OperationalError
    from psycopg import errors as pg_errors

    for pg_error in (pg_errors.DeadlockDetected("deadlock detected"),
                     pg_errors.SerializationFailure("could not serialize access")):
        def refused(**fields):
            raise _database_error(OperationalError, pg_error)

        monkeypatch.setattr("lessons.api.operations.memory_services.memory_create", refused)
        response = api.post("/memories", {"content": "Met Ana"})
        assert response.status_code == 503 and response["Retry-After"] == "1"
        assert response.json()["detail"].startswith("the database ended this request to settle a conflict")
        assert "unavailable" not in response.json()["detail"]
    assert not Memory.objects.exists()


def test_a_value_the_database_refuses_in_a_read_names_the_query_not_a_body(api, monkeypatch):
    from django.db import DataError
    from psycopg import errors as pg_errors

    def refused(**fields):
        raise _database_error(DataError, pg_errors.InvalidRegularExpression("invalid regular expression"))

    monkeypatch.setattr("lessons.api.memories.memory_list", refused)
    read = api.get("/memories", {"text": "ana"})
    assert read.status_code == 422 and read.json()["detail"].startswith("query: a value the database cannot store")
    monkeypatch.setattr("lessons.api.operations.memory_services.memory_create", refused)
    write = api.post("/memories", {"content": "Met Ana"})
    assert write.status_code == 422 and write.json()["detail"].startswith("body: a value the database cannot store")
