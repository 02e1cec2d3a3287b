"""Concurrent edits over HTTP: ETag on the answers, If-Match on PATCH, DELETE and restore
(lessons.api.preconditions), checked by the services under their row lock."""

import threading
import time

import pytest
from django.db import connection

from lessons.models import MAX_FREQUENCY, Lesson, Memory
from lessons.services.memories import memory_create, memory_update
from tests.api.conftest import JsonClient
from tests.factories import LessonFactory

pytestmark = pytest.mark.django_db


def _if_match(tag: str) -> dict:
    return {"headers": {"If-Match": tag}}


def test_a_memory_answer_carries_an_etag_that_moves_with_every_change(api, team):
    created = api.post("/memories", {"content": "Met Sam at the gym", "people": ["Sam"]})
    memory_id = created.json()["id"]
    first = created["ETag"]
    assert first.startswith(f'"m{memory_id}-') and first.endswith('"')
    read = api.get(f"/memories/{memory_id}")
    assert read["ETag"] == first
    patched = api.patch(f"/memories/{memory_id}", {"people": ["Sam", "Maria"]})
    assert patched.status_code == 200 and patched["ETag"] != first
    assert api.get(f"/memories/{memory_id}")["ETag"] == patched["ETag"]
    assert api.patch(f"/memories/{memory_id}", {"importance": 9})["ETag"] != patched["ETag"]


def test_the_testers_lost_update_is_refused(api, team):
    """A and B read memory 170; A adds Maria; B, still holding the old tag, adds Tom: 412, Maria kept."""
    memory = memory_create(team=team, content="Climbing with friends", people=["Sam"])
    tag = api.get(f"/memories/{memory.pk}")["ETag"]
    first = api.patch(f"/memories/{memory.pk}", {"people": ["Sam", "Maria"]}, **_if_match(tag))
    assert first.status_code == 200
    second = api.patch(f"/memories/{memory.pk}", {"people": ["Sam", "Tom"]}, **_if_match(tag))
    assert second.status_code == 412
    body = second.json()
    assert [error["field"] for error in body["errors"]] == ["If-Match"]
    assert body["detail"].startswith("If-Match: the memory was changed at ")
    assert f"since the version you sent ({tag}); GET it again and re-apply your change" in body["detail"]
    assert Memory.objects.get(pk=memory.pk).people == ["Sam", "Maria"]
    # read again and re-applied: it lands
    fresh = api.get(f"/memories/{memory.pk}")["ETag"]
    again = api.patch(f"/memories/{memory.pk}", {"people": ["Sam", "Maria", "Tom"]}, **_if_match(fresh))
    assert again.status_code == 200 and again.json()["people"] == ["Sam", "Maria", "Tom"]


@pytest.mark.parametrize("header", ["*", '"bogus", {current}', 'W/"x", {current}', "{current}"])
def test_the_current_tag_in_a_list_or_a_star_lets_the_write_through(api, team, header):
    memory = memory_create(team=team, content="Old text")
    current = api.get(f"/memories/{memory.pk}")["ETag"]
    response = api.patch(f"/memories/{memory.pk}", {"content": "New text"}, **_if_match(header.format(current=current)))
    assert response.status_code == 200, response.content
    assert Memory.objects.get(pk=memory.pk).content == "New text"


@pytest.mark.parametrize("header, said", [
    ('"bogus"', "no tag sent names a version of memory"),
    ('W/"{current}"', "every tag sent is weak (W/...), and If-Match compares strongly"),
    ('"m{other}-1"', "no tag sent names a version of memory"),  # another memory's
    ('"l{id}-{ms}"', "no tag sent names a version of memory"),
    ('"m{id}-99999999999999999999"', "no tag sent names a version of memory"),
    # a strong tag matches character for character: the numbers were compared, so these matched
    ('"m0{id}-{ms}"', "no tag sent names a version of memory"),
    ('"m{id}-000{ms}"', "no tag sent names a version of memory"),
])
def test_a_tag_that_is_not_the_current_one_is_412_and_nothing_is_written(api, team, header, said):
    memory = memory_create(team=team, content="Kept text")
    current = api.get(f"/memories/{memory.pk}")["ETag"]
    ms = current.strip('"').rsplit("-", 1)[1]
    # a weak tag never matches (If-Match compares strongly), nor a lesson's tag with the same id and moment
    sent = header.format(current=current.strip('"'), id=memory.pk, ms=ms, other=memory.pk + 1)
    response = api.patch(f"/memories/{memory.pk}", {"content": "Lost?"}, **_if_match(sent))
    assert response.status_code == 412
    assert response.json()["errors"][0]["field"] == "If-Match"
    # not "the memory was changed at ...": it was not
    assert response.json()["errors"][0]["message"].startswith(said)
    stored = Memory.objects.get(pk=memory.pk)
    assert (stored.content, stored.version) == ("Kept text", 1)


@pytest.mark.parametrize("header", ["bogus", "", '"unterminated', '"a" "b"', "m1-2"])
def test_a_malformed_if_match_is_400_naming_it(api, team, header):
    memory = memory_create(team=team, content="Kept text")
    for response in (
        api.patch(f"/memories/{memory.pk}", {"content": "x"}, **_if_match(header)),
        api.delete(f"/memories/{memory.pk}", **_if_match(header)),
    ):
        assert response.status_code == 400, response.content
        assert response.json()["errors"][0]["field"] == "If-Match"
    assert Memory.objects.get(pk=memory.pk).content == "Kept text"


def test_without_if_match_a_write_happens_as_before(api, team):
    memory = memory_create(team=team, content="Text")
    api.patch(f"/memories/{memory.pk}", {"importance": 2})
    assert api.patch(f"/memories/{memory.pk}", {"importance": 3}).status_code == 200
    assert api.delete(f"/memories/{memory.pk}").status_code == 204


def test_a_delete_with_a_stale_tag_is_412_and_the_memory_stays(api, team):
    memory = memory_create(team=team, content="Keep me")
    stale = api.get(f"/memories/{memory.pk}")["ETag"]
    api.patch(f"/memories/{memory.pk}", {"importance": 8})
    refused = api.delete(f"/memories/{memory.pk}", **_if_match(stale))
    assert refused.status_code == 412 and refused.json()["errors"][0]["field"] == "If-Match"
    assert Memory.objects.filter(pk=memory.pk).exists()
    current = api.get(f"/memories/{memory.pk}")["ETag"]
    assert api.delete(f"/memories/{memory.pk}", **_if_match(current)).status_code == 204
    assert not Memory.objects.filter(team=team).exists()


def test_a_restore_honours_if_match(api, team):
    memory = memory_create(team=team, content="First text")
    memory_update(memory=memory, content="Second text")
    first = Memory.objects.get(current_version=memory, version=1)
    stale = api.get(f"/memories/{memory.pk}")["ETag"]
    api.patch(f"/memories/{memory.pk}", {"people": ["Ana"]})
    path = f"/memories/{memory.pk}/versions/{first.pk}/restore"
    refused = api.post(path, **_if_match(stale))
    assert refused.status_code == 412 and refused.json()["errors"][0]["field"] == "If-Match"
    stored = Memory.objects.get(pk=memory.pk)
    assert (stored.content, stored.version) == ("Second text", 2)
    assert api.post(path, **_if_match("nope")).status_code == 400
    current = api.get(f"/memories/{memory.pk}")["ETag"]
    restored = api.post(path, **_if_match(current))
    assert restored.status_code == 200, restored.content
    assert restored.json()["content"] == "First text" and restored["ETag"] != current
    assert restored["ETag"] == api.get(f"/memories/{memory.pk}")["ETag"]


def test_a_lesson_honours_if_match_on_patch_and_delete(api, team):
    lesson = LessonFactory(team=team, title="Pin dependencies", confidence=0.4)
    tag = api.get(f"/lessons/{lesson.pk}")["ETag"]
    assert tag.startswith(f'"l{lesson.pk}-')
    changed = api.patch(f"/lessons/{lesson.pk}", {"confidence": 0.9}, **_if_match(tag))
    assert changed.status_code == 200 and changed["ETag"] != tag
    refused = api.patch(f"/lessons/{lesson.pk}", {"confidence": 0.1}, **_if_match(tag))
    assert refused.status_code == 412
    assert refused.json()["errors"][0]["message"].startswith("the lesson was changed at ")
    assert api.delete(f"/lessons/{lesson.pk}", **_if_match(tag)).status_code == 412
    assert Lesson.objects.get(pk=lesson.pk).confidence == 0.9
    assert api.patch(f"/lessons/{lesson.pk}", {"title": "x"}, **_if_match("bogus")).status_code == 400
    assert api.delete(f"/lessons/{lesson.pk}", **_if_match(changed["ETag"])).status_code == 204
    created = api.post("/lessons", {"title": "Cache the wheels"})
    assert created["ETag"] == api.get(f"/lessons/{created.json()['id']}")["ETag"]


@pytest.mark.parametrize("decision, status", [("accept", "confirmed"), ("reject", "rejected")])
def test_a_proposal_edited_since_it_was_reviewed_is_not_decided(api, team, decision, status):
    """A curator agent reviews a proposal; another agent rewrites its advice; accepting with the
    reviewed version's tag would confirm advice nobody reviewed: 412, still a proposal."""
    proposal = api.post("/lessons/propose", {"title": "Pin dependencies", "recommendation": "Pin exact versions"})
    reviewed = proposal["ETag"]
    lesson_id = proposal.json()["id"]
    edited = api.patch(f"/lessons/{lesson_id}", {"recommendation": "Never pin anything"})
    refused = api.post(f"/lessons/{lesson_id}/{decision}", **_if_match(reviewed))
    assert refused.status_code == 412 and refused.json()["errors"][0]["field"] == "If-Match"
    assert Lesson.objects.get(pk=lesson_id).status == "proposed"
    assert api.post(f"/lessons/{lesson_id}/{decision}", **_if_match("bogus")).status_code == 400
    decided = api.post(f"/lessons/{lesson_id}/{decision}", **_if_match(edited["ETag"]))
    assert decided.status_code == 200 and decided.json()["status"] == status
    assert decided["ETag"] == api.get(f"/lessons/{lesson_id}")["ETag"] != edited["ETag"]
    # a retry with the tag it sent: already decided, nothing to check, nothing written
    again = api.post(f"/lessons/{lesson_id}/{decision}", **_if_match(edited["ETag"]))
    assert again.status_code == 200 and again.json()["changed"] is False and again["ETag"] == decided["ETag"]


def test_another_teams_row_is_404_whatever_the_if_match(api, other_team):
    theirs = memory_create(team=other_team, content="Their diary")
    assert api.patch(f"/memories/{theirs.pk}", {"content": "Mine"}, **_if_match("*")).status_code == 404
    assert api.delete(f"/memories/{theirs.pk}", **_if_match('"bogus"')).status_code == 404
    assert Memory.objects.get(pk=theirs.pk).content == "Their diary"


def test_if_none_match_on_a_read_answers_304_when_the_tag_is_current(api, team):
    memory = memory_create(team=team, content="Text")
    tag = api.get(f"/memories/{memory.pk}")["ETag"]
    unchanged = api.get(f"/memories/{memory.pk}", headers={"If-None-Match": tag})
    assert unchanged.status_code == 304 and unchanged["ETag"] == tag and unchanged.content == b""
    api.patch(f"/memories/{memory.pk}", {"importance": 1})
    assert api.get(f"/memories/{memory.pk}", headers={"If-None-Match": tag}).status_code == 200


def test_the_openapi_document_declares_the_header_and_the_412():
    from memory_site.api import api as ninja_api

    paths = ninja_api.get_openapi_schema()["paths"]
    for path, method in (
        ("/api/v1/lessons/{lesson_id}", "patch"),
        ("/api/v1/lessons/{lesson_id}", "delete"),
        ("/api/v1/memories/{memory_id}", "patch"),
        ("/api/v1/memories/{memory_id}", "delete"),
        ("/api/v1/memories/{memory_id}/versions/{version_id}/restore", "post"),
        ("/api/v1/lessons/{lesson_id}/accept", "post"),
        ("/api/v1/lessons/{lesson_id}/reject", "post"),
    ):
        operation = paths[path][method]
        assert {"400", "412"} <= set(map(str, operation["responses"])), (path, method)
        assert "If-Match" in [parameter["name"] for parameter in operation["parameters"] if parameter["in"] == "header"]
        assert "If-Match" in operation["description"] and "412" in operation["description"]


@pytest.mark.django_db(transaction=True)
def test_two_patches_racing_with_the_same_tag_one_lands_the_other_is_412(team_key, team, monkeypatch):
    """The check is made under the row lock: the first PATCH is held inside its transaction (after
    the check, before its commit) while the second arrives with the same tag. Checked before the
    lock, the second would pass the check, wait, and then write over the first."""
    memory = memory_create(team=team, content="Climbing with friends", people=["Sam"])
    tag = JsonClient(team_key[1]).get(f"/memories/{memory.pk}")["ETag"]
    first_checked, release = threading.Event(), threading.Event()
    full_clean = Memory.full_clean

    def held_once(self, *args, **kwargs):  # runs under the row lock, after the If-Match check
        if not first_checked.is_set():
            first_checked.set()
            release.wait(10)
        return full_clean(self, *args, **kwargs)

    monkeypatch.setattr(Memory, "full_clean", held_once)
    answers = {}

    def patch(name, people):
        try:
            answers[name] = JsonClient(team_key[1]).patch(
                f"/memories/{memory.pk}", {"people": people}, **_if_match(tag)
            ).status_code
        finally:
            connection.close()

    maria = threading.Thread(target=patch, args=("maria", ["Sam", "Maria"]))
    maria.start()
    assert first_checked.wait(10)
    tom = threading.Thread(target=patch, args=("tom", ["Sam", "Tom"]))
    tom.start()
    time.sleep(0.5)  # Tom's PATCH is waiting for the row lock now
    release.set()
    maria.join(10), tom.join(10)
    assert answers == {"maria": 200, "tom": 412}
    assert Memory.objects.get(pk=memory.pk).people == ["Sam", "Maria"]


@pytest.mark.django_db(transaction=True)
def test_two_patches_sent_at_once_with_the_same_tag_exactly_one_lands(team_key, team):
    memory = memory_create(team=team, content="Climbing with friends", people=["Sam"])
    tag = JsonClient(team_key[1]).get(f"/memories/{memory.pk}")["ETag"]
    start = threading.Barrier(2)
    answers = []

    def patch(people):
        try:
            client = JsonClient(team_key[1])
            start.wait(10)
            answers.append(client.patch(f"/memories/{memory.pk}", {"people": people}, **_if_match(tag)).status_code)
        finally:
            connection.close()

    threads = [threading.Thread(target=patch, args=(people,)) for people in (["Sam", "Maria"], ["Sam", "Tom"])]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(20)
    assert sorted(answers) == [200, 412]
    assert Memory.objects.get(pk=memory.pk).people in (["Sam", "Maria"], ["Sam", "Tom"])


def test_a_merge_from_a_stale_read_is_refused_and_deletes_nothing(api, team):
    # a merge rewrites the kept row and deletes the others: it went ahead on a stale tag (even "stale")
    kept = LessonFactory(team=team, title="Pin the base image")
    other = LessonFactory(team=team, title="Pin base images by digest")
    stale = api.get(f"/lessons/{kept.pk}")["ETag"]
    assert api.patch(f"/lessons/{kept.pk}", {"title": "Pin the base image by digest"}).status_code == 200
    for tag in (stale, '"stale"'):
        response = api.post(f"/lessons/{kept.pk}/merge", {"merge_ids": [other.pk], "text_from": other.pk},
                            **_if_match(tag))
        assert response.status_code == 412 and response.json()["errors"][0]["field"] == "If-Match"
    assert Lesson.objects.filter(pk=other.pk).exists()
    assert Lesson.objects.get(pk=kept.pk).title == "Pin the base image by digest"
    fresh = api.get(f"/lessons/{kept.pk}")["ETag"]
    merged = api.post(f"/lessons/{kept.pk}/merge", {"merge_ids": [other.pk]}, **_if_match(fresh))
    assert merged.status_code == 200 and merged["ETag"] == api.get(f"/lessons/{kept.pk}")["ETag"] != fresh

    memory = memory_create(team=team, content="Climbing with Sam", people=["Sam"])
    twin = memory_create(team=team, content="Went climbing with Sam", people=["Sam", "Maria"])
    stale = api.get(f"/memories/{memory.pk}")["ETag"]
    memory_update(memory=memory, content="Climbing with Sam at the new gym")
    refused = api.post(f"/memories/{memory.pk}/merge", {"merge_id": twin.pk}, **_if_match(stale))
    assert refused.status_code == 412 and Memory.objects.filter(pk=twin.pk).exists()
    fresh = api.get(f"/memories/{memory.pk}")["ETag"]
    merged = api.post(f"/memories/{memory.pk}/merge", {"merge_id": twin.pk}, **_if_match(fresh))
    assert merged.status_code == 200 and merged.json()["memory"]["people"] == ["Sam", "Maria"]
    assert merged["ETag"] == api.get(f"/memories/{memory.pk}")["ETag"]


def test_a_merge_that_adds_nothing_new_still_moves_the_kept_memorys_tag(api, team):
    """The other memory held nothing the kept one lacked: the merge deleted it and recorded itself,
    but the kept memory's updated_at, and so its ETag, stayed, and an agent holding the tag could
    not tell that a merge had happened."""
    kept = memory_create(team=team, content="Tag merge keep", people=["Sam", "Maria"], emotions=["happy"],
                         categories=["event"], importance=8)
    other = memory_create(team=team, content="Tag merge other", people=["sam"], emotions=["happy"],
                          categories=["event"], importance=2)
    tag = api.get(f"/memories/{kept.pk}")["ETag"]
    merged = api.post(f"/memories/{kept.pk}/merge", {"merge_id": other.pk}, **_if_match(tag))
    assert merged.status_code == 200, merged.content
    assert merged["ETag"] != tag and api.get(f"/memories/{kept.pk}")["ETag"] == merged["ETag"]
    stale = api.patch(f"/memories/{kept.pk}", {"importance": 9}, **_if_match(tag))
    assert stale.status_code == 412


def test_a_merge_that_changes_none_of_the_kept_lessons_fields_still_moves_its_tag(api, team):
    """Frequency at its cap, the higher confidence and the same tags: 200 with the same ETag, and
    If-None-Match with the tag from before the merge answered 304."""
    kept = LessonFactory(team=team, frequency=MAX_FREQUENCY, confidence=0.9, tags=["x"])
    other = LessonFactory(team=team, frequency=MAX_FREQUENCY, confidence=0.1, tags=["x"])
    tag = api.get(f"/lessons/{kept.pk}")["ETag"]
    merged = api.post(f"/lessons/{kept.pk}/merge", {"merge_ids": [other.pk]}, **_if_match(tag))
    assert merged.status_code == 200, merged.content
    assert merged["ETag"] != tag and api.get(f"/lessons/{kept.pk}")["ETag"] == merged["ETag"]
    assert api.get(f"/lessons/{kept.pk}", headers={"If-None-Match": tag}).status_code == 200
