import pytest
from django.core.exceptions import ValidationError

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


def test_an_edit_of_a_memory_merged_away_meanwhile_says_it_is_gone(team):
    from lessons.services.curation import memory_merge

    kept, other = memory_create(team=team, content="Ran with Ana"), memory_create(team=team, content="Run, Ana")
    stale = Memory.objects.get(pk=other.pk)
    memory_merge(keep=kept, merged=other)
    # the same words as a lesson's ("Memory matching query does not exist." said less)
    gone = f"memory {stale.pk} does not exist \\(deleted or merged meanwhile\\)"
    with pytest.raises(Memory.DoesNotExist, match=gone):
        memory_update(memory=stale, importance=9)
