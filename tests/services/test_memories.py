import threading
import time
from datetime import UTC, datetime

import pytest
from django.core.exceptions import ValidationError
from django.db import connection, transaction

from lessons.models import Memory
from lessons.services.memories import memory_create, memory_delete, memory_update

pytestmark = pytest.mark.django_db


def test_changing_text_keeps_the_previous_text_as_a_version(team):
    memory = memory_create(team=team, content="Maria works as a nurse", details="Night shifts.", people=["Maria"])
    memory_update(memory=memory, content="Maria became a midwife")
    memory_update(memory=memory, details="Loves the day shifts now.")

    memory.refresh_from_db()
    assert memory.version == 3
    assert memory.content == "Maria became a midwife"
    assert memory.is_current
    versions = list(memory.previous_versions.order_by("version"))
    assert [(v.version, v.content, v.details) for v in versions] == [
        (1, "Maria works as a nurse", "Night shifts."),
        (2, "Maria became a midwife", "Night shifts."),
    ]
    assert all(v.people == ["Maria"] and v.team_id == team.id for v in versions)
    assert Memory.objects.filter(current_version__isnull=True).count() == 1


def test_changing_other_fields_makes_no_version(team):
    memory = memory_create(team=team, content="Climbing on Tuesdays", importance=4)
    memory_update(memory=memory, importance=8, emotions=["Happy"])
    memory.refresh_from_db()
    assert (memory.version, memory.importance, memory.emotions) == (1, 8, ["happy"])
    assert not memory.previous_versions.exists()


def test_a_version_keeps_the_embedding_of_its_own_text(team):
    memory = memory_create(team=team, content="First text")
    Memory.objects.filter(pk=memory.pk).update(embedding=[0.5] * 384, embedding_model="m", content_hash="h")
    memory.refresh_from_db()
    memory_update(memory=memory, content="Second text")
    version = memory.previous_versions.get()
    assert version.content_hash == "h" and list(version.embedding)[:2] == [0.5, 0.5]


def test_admin_style_update_versions_from_the_stored_text(team):
    """The admin form writes new values onto the object, then passes the fields it changed."""
    memory = memory_create(team=team, content="Old words")
    memory.content = "New words"
    memory_update(memory=memory, content=memory.content)
    assert memory.previous_versions.get().content == "Old words"


def test_only_the_fields_given_are_written_not_the_callers_stale_copy(team):
    memory = memory_create(team=team, content="Old words", importance=3)
    stale = Memory.objects.get(pk=memory.pk)
    memory_update(memory=memory, content="New words")  # another request, meanwhile
    memory_update(memory=stale, importance=8)
    stored = Memory.objects.get(pk=memory.pk)
    assert (stored.content, stored.importance, stored.version) == ("New words", 8, 2)
    assert [version.content for version in stored.previous_versions.all()] == ["Old words"]


def test_invalid_update_changes_nothing(team):
    memory = memory_create(team=team, content="Keep me")
    with pytest.raises(ValidationError):
        memory_update(memory=memory, content="Changed", importance=11)
    memory.refresh_from_db()
    assert (memory.content, memory.version) == ("Keep me", 1)
    assert not Memory.objects.filter(current_version=memory).exists()


def test_earlier_versions_are_read_only_and_deleted_with_their_memory(team):
    memory = memory_create(team=team, content="One")
    memory_update(memory=memory, content="Two")
    version = memory.previous_versions.get()
    with pytest.raises(ValidationError):
        memory_update(memory=version, content="Rewrite history")
    memory_delete(memory=memory)
    assert not Memory.objects.exists()


def test_people_are_one_each_in_any_case_and_a_name_needs_a_letter(team):
    typed = ["Smith, John", "smith, john", ",", " , ", "\u200b", "A\u200bnn", "Zoe\u0301", "Zoé"]
    memory = memory_create(team=team, content="Board meeting", people=typed)
    assert memory.people == ["Smith, John", "Ann", "Zoé"]


def test_a_name_typed_twice_keeps_a_capitalised_spelling_and_turkish_i_is_one_letter(team):
    # "İlker" and "ilker" were stored as two people, counted as one by the friends listing; and
    # ["anna", "Anna"] kept "anna"
    typed = ["  anna  ", "İlker", "Anna", "ilker", "ANNA", "bob", "zoë", "ZOË"]
    memory = memory_create(team=team, content="Board meeting", people=typed)
    assert memory.people == ["Anna", "İlker", "bob", "ZOË"]


def test_a_name_with_or_without_accents_or_in_compatibility_form_is_stored_once(team):
    # ["Zoë", "zoe"] stored two names the friends listing counted as one person; the spelling that says
    # more is kept (form, then capital, then accents), in the first one's place
    typed = ["zoe", "Bob", "Zoë", "Ｓａｍ", "Sam", "Zoe", "ガク", "カク", "Søren", "Jose\u0301", "jose"]
    memory = memory_create(team=team, content="Board meeting", people=typed)
    assert memory.people == ["Zoë", "Bob", "Sam", "ガク", "カク", "Søren", "José"]


def test_an_edit_of_a_memory_merged_away_meanwhile_says_it_is_gone(team):
    from lessons.services.curation import memory_merge

    kept, other = memory_create(team=team, content="Ran with Ana"), memory_create(team=team, content="Run, Ana")
    stale = Memory.objects.get(pk=other.pk)
    memory_merge(keep=kept, merged=other)
    # the same words as a lesson's ("Memory matching query does not exist." said less)
    gone = f"memory {stale.pk} does not exist \\(deleted or merged meanwhile\\)"
    with pytest.raises(Memory.DoesNotExist, match=gone):
        memory_update(memory=stale, importance=9)


@pytest.mark.django_db(transaction=True)
def test_a_delete_racing_an_edit_waits_for_it_and_takes_its_new_version_too(team):
    """An edit under way (its row lock held, its new version written, not yet committed) and a
    delete: the delete collected the versions before the edit's existed, and failed at commit on
    the version left pointing at the memory (a 409 naming a foreign key; the memory stayed)."""
    memory = memory_create(team=team, content="Ana runs on Sundays")
    edit_written, commit_edit = threading.Event(), threading.Event()
    failures = []

    def edit():
        try:
            with transaction.atomic():
                memory_update(memory=Memory.objects.get(pk=memory.pk), content="Ana runs on Saturdays")
                edit_written.set()
                commit_edit.wait(10)
        except Exception as error:  # noqa: BLE001 - reported to the test below
            failures.append(error)
        finally:
            connection.close()

    def delete():
        try:
            memory_delete(memory=Memory.objects.get(pk=memory.pk))
        except Exception as error:  # noqa: BLE001
            failures.append(error)
        finally:
            connection.close()

    editor = threading.Thread(target=edit)
    editor.start()
    assert edit_written.wait(10)
    deleter = threading.Thread(target=delete)
    deleter.start()
    time.sleep(0.5)  # the delete is waiting for the edit's lock now
    commit_edit.set()
    editor.join(10), deleter.join(10)
    assert failures == []
    assert not Memory.objects.filter(team=team).exists()  # the memory and both its texts


def test_a_delete_of_a_memory_merged_away_meanwhile_says_it_is_gone(team):
    memory = memory_create(team=team, content="Gone already")
    stale = Memory.objects.get(pk=memory.pk)
    memory_delete(memory=memory)
    with pytest.raises(Memory.DoesNotExist, match="deleted or merged meanwhile"):
        memory_delete(memory=stale)


def test_every_writer_is_held_to_the_texts_limit(team):
    # the services check it for the imports and the admin, as the API's schemas do
    with pytest.raises(ValidationError) as refused:
        memory_create(team=team, content="x" * 20_001)
    assert "content" in refused.value.message_dict
    memory = memory_create(team=team, content="Short")
    with pytest.raises(ValidationError) as refused:
        memory_update(memory=memory, details="y" * 20_001)
    assert "details" in refused.value.message_dict
    assert Memory.objects.get(pk=memory.pk).details == ""


def test_an_update_or_delete_from_a_stale_read_is_refused_and_writes_nothing(team):
    from lessons.services.common import ChangedSinceRead

    memory = memory_create(team=team, content="Climbing", people=["Sam"])
    read_at = datetime(2024, 1, 1, 12, 0, 0, 123456, tzinfo=UTC)  # the writes below are later
    Memory.objects.filter(pk=memory.pk).update(updated_at=read_at)
    memory_update(memory=Memory.objects.get(pk=memory.pk), people=["Sam", "Maria"], expected_updated_at=read_at)
    with pytest.raises(ChangedSinceRead) as refused:
        memory_update(memory=Memory.objects.get(pk=memory.pk), people=["Sam", "Tom"], expected_updated_at=read_at)
    assert refused.value.row.people == ["Sam", "Maria"]  # the row as stored, read under the lock
    with pytest.raises(ChangedSinceRead):
        memory_delete(memory=memory, expected_updated_at=[read_at])
    stored = Memory.objects.get(pk=memory.pk)
    assert stored.people == ["Sam", "Maria"]
    # to the millisecond, as answers write updated_at; one of several is enough
    shown = stored.updated_at.replace(microsecond=stored.updated_at.microsecond // 1000 * 1000)
    memory_update(memory=stored, importance=9, expected_updated_at=[read_at, shown])
    assert Memory.objects.get(pk=memory.pk).importance == 9


def test_a_restore_from_a_stale_read_is_refused(team):
    from lessons.services.common import ChangedSinceRead
    from lessons.services.curation import memory_restore_version

    memory = memory_create(team=team, content="First")
    memory_update(memory=memory, content="Second")
    read_at = datetime(2024, 1, 1, tzinfo=UTC)
    Memory.objects.filter(pk=memory.pk).update(updated_at=read_at)
    memory_update(memory=memory, importance=2)
    first = Memory.objects.get(current_version=memory, version=1)
    with pytest.raises(ChangedSinceRead):
        memory_restore_version(memory=Memory.objects.get(pk=memory.pk), version=first, expected_updated_at=read_at)
    assert Memory.objects.get(pk=memory.pk).content == "Second"
