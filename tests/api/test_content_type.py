"""A body is read as JSON only when its Content-Type says it is JSON (lessons.api.parser): a form
(`curl -d`), text/plain, multipart or no Content-Type at all was read as JSON anyway, or failed as
"malformed JSON". Writes that take no body take no body, or `{}`, under any Content-Type."""

import json

import pytest
from django.test.client import FakePayload

from lessons.models import Lesson, Memory, SearchRecord
from tests.api.conftest import API
from tests.factories import LessonFactory

pytestmark = pytest.mark.django_db

LESSON = json.dumps({"title": "Retry uploads with backoff", "description": "The network drops calls."})
ACCEPTED = "application/json (or any application/*+json type)"


def send(api, method: str, path: str, body: bytes | str = b"", content_type: str | None = None, **headers):
    """A request with exactly this body and Content-Type (None: no Content-Type header at all),
    which Django's test client does not send for a POST."""
    body = body.encode() if isinstance(body, str) else body
    environ = {"REQUEST_METHOD": method, "PATH_INFO": API + path, "wsgi.input": FakePayload(body),
               "CONTENT_LENGTH": str(len(body)), **headers}
    if content_type is not None:
        environ["CONTENT_TYPE"] = content_type
    return api.client.request(**environ)


def assert_refused(response, message: str, *, header: str = "Accept-Post"):
    assert response.status_code == 415, response.content
    assert response["Content-Type"].startswith("application/json")
    assert response.json() == {"detail": f"Content-Type: {message}",
                               "errors": [{"field": "Content-Type", "message": message}]}
    assert response[header] == "application/json"


@pytest.mark.parametrize("content_type, message", [
    ("text/plain", f"'text/plain' is not read here; send the body as {ACCEPTED}"),
    ("text/plain; charset=utf-8", f"'text/plain' is not read here; send the body as {ACCEPTED}"),
    ("application/x-www-form-urlencoded",
     "'application/x-www-form-urlencoded' is not read here (`curl -d` sends a form unless given "
     f"-H 'Content-Type: application/json'); send the body as {ACCEPTED}"),
    ("multipart/form-data; boundary=BoUnDaRy",
     f"'multipart/form-data' is not read here; send the body as {ACCEPTED}"),
    ("text/json", f"'text/json' is not read here; send the body as {ACCEPTED}"),
    ("application/octet-stream", f"'application/octet-stream' is not read here; send the body as {ACCEPTED}"),
    ("application/+json", f"'application/+json' is not read here; send the body as {ACCEPTED}"),
    (None, f"missing; send the body as {ACCEPTED}"),
    ("", f"missing; send the body as {ACCEPTED}"),
])
def test_a_json_body_not_sent_as_json_is_refused_by_its_content_type_and_nothing_is_stored(
        api, team, content_type, message):
    before = Lesson.objects.count()
    assert_refused(send(api, "POST", "/lessons", LESSON, content_type), message)
    assert Lesson.objects.count() == before


@pytest.mark.parametrize("charset", ["latin-1", "ISO-8859-1", "utf-16", "us-ascii", "nonsense", ""])
def test_a_charset_other_than_utf8_is_refused_rather_than_read_as_utf8(api, team, charset):
    before = Memory.objects.count()
    body = json.dumps({"content": "Zoë moved to Köln"}, ensure_ascii=False).encode("latin-1")
    response = send(api, "POST", "/memories", body, f"application/json; charset={charset}")
    message = f"charset '{charset}' is not read here; JSON is read as UTF-8: send charset=utf-8, or no charset"
    assert_refused(response, message)
    assert Memory.objects.count() == before


def test_a_real_form_is_refused_too(api, team):
    # Django's test client, and a browser's form, send multipart unless told otherwise
    before = Lesson.objects.count()
    response = api.client.post(f"{API}/lessons", {"title": "Retry uploads with backoff"})
    assert_refused(response, f"'multipart/form-data' is not read here; send the body as {ACCEPTED}")
    form = send(api, "POST", "/lessons", "title=Retry+uploads", "application/x-www-form-urlencoded")
    assert form.status_code == 415  # not a 400 "malformed JSON": the Content-Type is what is wrong
    assert Lesson.objects.count() == before


@pytest.mark.parametrize("content_type", [
    "application/json",
    "application/json; charset=utf-8",
    "Application/JSON; Charset=UTF-8",
    "application/json;charset=\"utf-8\"",
    "application/json; charset=utf8",
    "application/json; profile=https://example.com/lesson",
    "application/vnd.api+json",
    "application/merge-patch+json",
])
def test_json_is_read_in_any_case_with_parameters_and_as_any_json_suffix(api, team, content_type):
    response = send(api, "POST", "/lessons", LESSON, content_type)
    assert response.status_code == 201, response.content
    assert Lesson.objects.get(pk=response.json()["id"]).title == "Retry uploads with backoff"


def test_utf8_text_is_read_as_utf8(api, team):
    body = json.dumps({"content": "Zoë moved to Köln"}, ensure_ascii=False).encode()
    response = send(api, "POST", "/memories", body, "application/json; charset=UTF-8")
    assert response.status_code == 201, response.content
    assert Memory.objects.get(pk=response.json()["id"]).content == "Zoë moved to Köln"


def test_a_change_not_sent_as_json_is_refused_and_changes_nothing(api, team):
    lesson = LessonFactory(team=team, confidence=0.4)
    response = send(api, "PATCH", f"/lessons/{lesson.pk}", '{"confidence": 0.9}', "text/plain")
    assert_refused(response, f"'text/plain' is not read here; send the body as {ACCEPTED}", header="Accept-Patch")
    lesson.refresh_from_db()
    assert lesson.confidence == 0.4
    merge_patch = send(api, "PATCH", f"/lessons/{lesson.pk}", '{"confidence": 0.9}', "application/merge-patch+json")
    assert merge_patch.status_code == 200 and merge_patch.json()["confidence"] == 0.9


def test_a_search_not_sent_as_json_is_refused_and_not_recorded(api, team):
    before = SearchRecord.objects.count()
    assert send(api, "POST", "/search", '{"query": "retries"}', "text/plain").status_code == 415
    assert SearchRecord.objects.count() == before
    assert send(api, "POST", "/search", '{"query": "retries"}', "application/json").status_code == 200


def test_what_else_is_wrong_with_a_body_keeps_its_own_answer(api, anonymous, team):
    # no body at all: still "empty" (400), not a Content-Type to fix first
    for content_type in (None, "text/plain", "application/json"):
        empty = send(api, "POST", "/lessons", b"", content_type)
        assert empty.status_code == 400, (content_type, empty.content)
        assert empty.json()["errors"] == [{"field": "body", "message": "the body is empty; send a JSON object"}]
    malformed = send(api, "POST", "/lessons", '{"title": ', "application/json")
    assert malformed.status_code == 400 and malformed.json()["errors"][0]["field"] == "body"
    twice = send(api, "POST", "/lessons", '{"title": "a", "title": "b"}', "application/json")
    assert twice.status_code == 400 and "appears twice" in twice.json()["detail"]
    # the key is checked before the body's Content-Type
    assert send(anonymous, "POST", "/lessons", LESSON, "text/plain").status_code == 401


def test_a_write_that_takes_no_body_takes_none_or_an_empty_object_under_any_content_type(api, team):
    proposals = LessonFactory.create_batch(8, team=team, status="proposed")
    no_content_type = send(api, "POST", f"/lessons/{proposals[0].pk}/accept")
    assert no_content_type.status_code == 200, no_content_type.content
    for proposal, (body, content_type) in zip(proposals[1:], [
        ("{}", "application/x-www-form-urlencoded"),  # what some clients send on every POST
        ("{}", "text/plain"),
        ("{}", None),
        ("{}", "multipart/form-data; boundary=BoUnDaRy"),
        ("{}", "multipart/form-data"),  # no boundary: Django cannot read it as a form (it was a 500)
        ("", "text/plain"),
    ]):
        response = send(api, "POST", f"/lessons/{proposal.pk}/accept", body, content_type)
        assert response.status_code == 200, (body, content_type, response.content)
    assert api.client.post(f"{API}/lessons/{proposals[7].pk}/accept").status_code == 200  # an empty form
    assert {lesson.status for lesson in Lesson.objects.filter(pk__in=[p.pk for p in proposals])} == {"confirmed"}


def test_a_write_that_takes_no_body_still_names_the_field_it_does_not_take(api, team):
    # 422 naming the field, whatever the Content-Type: the endpoint reads no body at all
    proposal = LessonFactory(team=team, status="proposed")
    accept = f"/lessons/{proposal.pk}/accept"
    for content_type in ("text/plain", None, "application/json", "multipart/form-data"):
        response = send(api, "POST", accept, '{"status": "rejected"}', content_type)
        assert response.status_code == 422, (content_type, response.content)
        assert response.json()["errors"][0]["field"] == "status"
    unreadable_form = send(api, "POST", accept, "status=rejected", "multipart/form-data")
    assert unreadable_form.status_code == 422 and unreadable_form.json()["errors"][0]["field"] == "body"
    proposal.refresh_from_db()
    assert proposal.status == "proposed"
    deleted = send(api, "DELETE", f"/lessons/{proposal.pk}")
    assert deleted.status_code == 204


def test_reads_are_unaffected_by_a_content_type(api, team):
    LessonFactory(team=team)
    for content_type in ("text/plain", "application/x-www-form-urlencoded", None):
        listed = send(api, "GET", "/lessons", content_type=content_type)
        assert listed.status_code == 200 and listed.json()["count"] == 1
        assert send(api, "HEAD", "/lessons", content_type=content_type).status_code == 200


def test_the_docs_still_say_the_body_is_json(api):
    document = api.get("/openapi.json").json()
    for path, method in [("/api/v1/lessons", "post"), ("/api/v1/lessons/{lesson_id}", "patch"),
                         ("/api/v1/search", "post"), ("/api/v1/memories", "post")]:
        assert list(document["paths"][path][method]["requestBody"]["content"]) == ["application/json"], path
