import pytest

from lessons.selectors.embeddings import with_embedding_status
from lessons.services.embeddings import embeddings_deferred
from lessons.services.lessons import lesson_create, lesson_delete
from lessons.tasks import embed_item

pytestmark = pytest.mark.django_db


def test_embed_item_embeds_a_pending_row_once(team):
    with embeddings_deferred():
        lesson = lesson_create(team=team, title="Keep migrations reversible")
    assert embed_item.call(kind="lessons", item_id=lesson.pk)["embedded"] == 1
    assert with_embedding_status(queryset=type(lesson).objects.filter(pk=lesson.pk)).get().embedding_status == "fresh"
    # A second task for the same row (two saves in one transaction queue two) costs no encode.
    assert embed_item.call(kind="lessons", item_id=lesson.pk)["embedded"] == 0


def test_embed_item_for_a_row_deleted_meanwhile_does_nothing(team):
    with embeddings_deferred():
        lesson = lesson_create(team=team, title="Short-lived")
    lesson_id = lesson.pk
    lesson_delete(lesson=lesson)
    assert embed_item.call(kind="lessons", item_id=lesson_id) == {
        "embedded": 0,
        "changed_meanwhile": 0,
        "failed": 0,
        "reason": None,
    }


def test_embed_item_refuses_an_unknown_kind():
    with pytest.raises(ValueError, match="kind must be one of lessons, memories"):
        embed_item.call(kind="notes", item_id=1)
