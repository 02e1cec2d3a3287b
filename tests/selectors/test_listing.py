import pytest

from lessons.models import Lesson, Memory
from lessons.selectors.listing import lesson_get, lesson_list, memory_get, memory_list, memory_versions
from lessons.services.memories import memory_update
from tests.factories import LessonFactory, MemoryFactory

pytestmark = pytest.mark.django_db


def test_lessons_are_scoped_to_the_team(team, other_team):
    ours = LessonFactory(team=team)
    theirs = LessonFactory(team=other_team)
    assert list(lesson_list(team=team)) == [ours]
    assert lesson_get(team=team, lesson_id=ours.pk) == ours
    with pytest.raises(Lesson.DoesNotExist, match=str(theirs.pk)):
        lesson_get(team=team, lesson_id=theirs.pk)


def test_memories_are_scoped_to_the_team_and_current(team, other_team):
    ours = MemoryFactory(team=team, content="First")
    MemoryFactory(team=other_team)
    memory_update(memory=ours, content="Second")
    earlier = Memory.objects.get(current_version=ours)
    assert list(memory_list(team=team)) == [ours]
    with pytest.raises(Memory.DoesNotExist):
        memory_get(team=team, memory_id=earlier.pk)
    assert [(m.version, m.content) for m in memory_versions(memory=memory_get(team=team, memory_id=ours.pk))] == [
        (2, "Second"),
        (1, "First"),
    ]
