import pytest
from django.core.exceptions import ValidationError

from lessons.models import Lesson
from lessons.services.lessons import lesson_accept, lesson_create, lesson_propose, lesson_reject, lesson_update

pytestmark = pytest.mark.django_db


def test_lesson_create_normalises_terms(team):
    lesson = lesson_create(team=team, title="  Use RLS  ", tags=["RLS", "rls", " Multi-Tenant "], tech_stacks=["Supabase"])
    assert lesson.title == "Use RLS"
    assert lesson.tags == ["rls", "multi-tenant"]
    assert lesson.tech_stacks == ["supabase"]


@pytest.mark.parametrize(
    "field, value",
    [("confidence", 7), ("frequency", 0), ("status", "maybe"), ("title", ""), ("category", "Not OK!"),
     ("title", "\u200b\u200b"), ("title", " \ufeff\u2060 ")],  # invisible only: as blank as ""
)
def test_lesson_create_rejects_bad_values_and_writes_nothing(team, field, value):
    arguments = {"title": "A title", field: value}
    with pytest.raises(ValidationError) as error:
        lesson_create(team=team, **arguments)
    assert field in error.value.message_dict
    assert not Lesson.objects.exists()


def test_lesson_update_saves_only_real_changes(team):
    lesson = lesson_create(team=team, title="Original", confidence=0.4)
    stamp = lesson.updated_at
    lesson_update(lesson=lesson, title="Original", confidence=0.4)
    assert Lesson.objects.get(pk=lesson.pk).updated_at == stamp
    lesson_update(lesson=lesson, confidence=0.9)
    assert Lesson.objects.get(pk=lesson.pk).confidence == 0.9


def test_lesson_update_refuses_unknown_fields(team):
    lesson = lesson_create(team=team, title="Original")
    with pytest.raises(TypeError):
        lesson_update(lesson=lesson, embedding=[0.0] * 384)


def test_propose_accept_reject(team):
    lesson = lesson_propose(team=team, title="Maybe cache the session")
    assert lesson.status == "proposed"
    assert lesson_accept(lesson=lesson).status == "confirmed"
    assert lesson_reject(lesson=lesson).status == "rejected"
    assert Lesson.objects.get(pk=lesson.pk).status == "rejected"


def test_invisible_characters_do_not_hide_a_word(team):
    lesson = lesson_create(team=team, title="Rotate the pass\u200bword", description="Keep the sec\u2060ret out")
    assert (lesson.title, lesson.description) == ("Rotate the password", "Keep the secret out")
    emoji_family = "Family 👨\u200d👩\u200d👧 photo"  # a zero-width joiner is part of the emoji
    assert lesson_create(team=team, title=emoji_family).title == emoji_family
