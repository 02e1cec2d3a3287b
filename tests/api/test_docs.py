import re

import pytest
from django.test import override_settings

from tests.api.conftest import JsonClient

pytestmark = pytest.mark.django_db


def test_openapi_document_lists_every_endpoint(anonymous):
    paths = anonymous.get("/openapi.json").json()["paths"]
    expected = {
        "/api/v1/search": {"post"},
        "/api/v1/lessons": {"get", "post"},
        "/api/v1/lessons/{lesson_id}": {"get", "patch", "delete"},
        "/api/v1/lessons/propose": {"post"},
        "/api/v1/lessons/{lesson_id}/accept": {"post"},
        "/api/v1/lessons/{lesson_id}/reject": {"post"},
        "/api/v1/lessons/relevant": {"get"},
        "/api/v1/lessons/patterns": {"get"},
        "/api/v1/lessons/session": {"post"},
        "/api/v1/memories": {"get", "post"},
        "/api/v1/memories/{memory_id}": {"get", "patch", "delete"},
        "/api/v1/memories/{memory_id}/versions": {"get"},
        "/api/v1/memories/friends": {"get"},
        "/api/v1/memories/panic-attacks": {"get"},
        "/api/v1/memories/interests": {"get"},
        "/api/v1/memories/events": {"get"},
        "/api/v1/memories/by-person": {"get"},
        "/api/v1/memories/by-emotion": {"get"},
        "/api/v1/memories/search-versions": {"post"},
        "/api/v1/health": {"get"},
        "/api/v1/tools": {"get"},
    }
    for path, methods in expected.items():
        assert methods <= set(paths[path]), path


def test_every_operation_behind_a_key_declares_its_error_answers(anonymous):
    document = anonymous.get("/openapi.json").json()
    open_paths = {"/api/v1/health", "/api/v1/tools"}
    checked = 0
    for path, operations in document["paths"].items():
        if path in open_paths:
            continue
        for method, operation in operations.items():
            responses = operation["responses"]
            for status in ("401", "422", "503"):
                assert status in responses, f"{method.upper()} {path} does not declare {status}"
                schema = responses[status]["content"]["application/json"]["schema"]
                assert schema["$ref"].endswith("/ErrorOut"), (method, path, status)
            if "{" in path:
                assert "404" in responses, f"{method.upper()} {path} does not declare 404"
            checked += 1
    assert checked >= 24  # search, 11 lesson and 12 memory operations


def test_every_operation_reading_a_body_declares_400_and_413(anonymous, api):
    document = anonymous.get("/openapi.json").json()
    with_body = [
        (method, path, operation)
        for path, operations in document["paths"].items()
        for method, operation in operations.items()
        if "requestBody" in operation
    ]
    # search, lessons (create, propose, session, patch), memories (3), the curation operations, feedback
    assert len(with_body) >= 8
    for method, path, operation in with_body:
        for status in ("400", "413"):
            assert status in operation["responses"], f"{method.upper()} {path} does not declare {status}"
    response = api.post("/search", "{not json")
    assert response.status_code == 400
    assert response.json()["errors"][0]["field"] == "body"


def test_the_declared_401_is_what_an_unknown_key_gets(anonymous):
    response = JsonClient("msk_00000000_not-a-real-key").get("/lessons")
    assert response.status_code == 401
    assert set(response.json()) == {"detail", "errors"}


def test_no_schema_exposes_an_embedding(anonymous):
    schemas = anonymous.get("/openapi.json").json()["components"]["schemas"]
    for name, schema in schemas.items():
        assert "embedding" not in schema.get("properties", {}), name


@override_settings(DEBUG=False)
def test_docs_are_served_from_local_static_files_with_debug_off():
    client = JsonClient()
    page = client.get("/docs")
    assert page.status_code == 200
    html = page.content.decode()
    assert not re.search(r"(src|href)=\"(https?:)?//", html), "the docs page must not load anything from another host"
    assets = re.findall(r"(?:src|href)=\"(/static/[^\"]+)\"", html)
    assert any(asset.endswith("swagger-ui-bundle.js") for asset in assets)
    for asset in assets:
        response = client.client.get(asset)
        assert response.status_code == 200, asset
        body = b"".join(response.streaming_content)
        assert body


def test_the_openapi_document_tells_staff_how_to_name_their_team(anonymous):
    document = anonymous.get("/openapi.json").json()
    scheme = document["components"]["securitySchemes"]["StaffTeam"]
    assert (scheme["type"], scheme["in"], scheme["name"]) == ("apiKey", "header", "X-Team")
    search = document["paths"]["/api/v1/search"]["post"]
    assert {"StaffSessionAuth": [], "StaffTeam": []} in search["security"] and {"ApiKeyAuth": []} in search["security"]
    checked = 0
    for path, operations in document["paths"].items():
        for method, operation in operations.items():
            if operation.get("security"):
                assert "400" in operation["responses"], f"{method.upper()} {path}"
                assert "X-Team" in operation["responses"]["400"]["description"]
                checked += 1
    assert checked >= 24
    assert "security" not in document["paths"]["/api/v1/health"]["get"]


def test_the_docs_search_example_answers_200_for_staff(admin_user, team):
    from django.test import Client

    document = JsonClient().get("/openapi.json").json()
    example = document["paths"]["/api/v1/search"]["post"]["requestBody"]["content"]["application/json"]["example"]
    browser = Client(enforce_csrf_checks=False)
    browser.force_login(admin_user)
    response = browser.post("/api/v1/search", example, content_type="application/json", headers={"X-Team": team.slug})
    assert response.status_code == 200, response.content
    assert response.json()["mode"] == "hybrid"


def test_the_docs_page_has_a_team_picker_for_staff_only(admin_user, team):
    from django.test import Client

    anonymous = Client().get("/api/v1/docs").content.decode()
    assert 'id="staff-team"' not in anonymous
    staff = Client()
    staff.force_login(admin_user)
    page = staff.get("/api/v1/docs").content.decode()
    assert 'id="staff-team"' in page and f'<option value="{team.slug}">' in page and 'data-initial="acme"' in page


def test_search_answers_are_described_as_strictly_as_they_are_written(anonymous, api):
    """Every field of a search answer is in every answer, with the values it can take: the document
    said `relevance` was any string defaulting to "", and nothing was required."""
    schemas = anonymous.get("/openapi.json").json()["components"]["schemas"]
    hit, answer = schemas["SearchHitOut"], schemas["SearchOut"]
    assert set(hit["required"]) >= {"id", "kind", "score", "relevance", "found_by", "collapsed_ids", "explanation"}
    assert hit["properties"]["relevance"]["enum"] == ["high", "medium", "low"]
    assert hit["properties"]["kind"]["enum"] == ["lesson", "memory"]
    assert set(answer["required"]) >= {"mode", "results", "search_id", "fallback", "degraded"}
    assert answer["properties"]["mode"]["enum"] == ["hybrid", "semantic", "text"]
    search_id = answer["properties"]["search_id"]
    assert {"type": "string", "format": "uuid"} in search_id["anyOf"]
    assert schemas["LessonOut"]["properties"]["id"] == {"title": "Id", "type": "integer"}
    assert schemas["LessonOut"]["properties"]["status"]["enum"] == ["proposed", "confirmed", "rejected"]
    # and the answers hold to it
    body = api.post("/search", {"query": "anything at all", "explain": True}).json()
    for name in answer["required"]:
        assert name in body
