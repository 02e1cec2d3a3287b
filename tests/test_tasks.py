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


def test_embed_pending_counts_failed_rows_and_gives_the_reason(team, settings):
    from lessons.tasks import embed_pending

    settings.EMBEDDING_BACKEND = {**settings.EMBEDDING_BACKEND, "BACKEND": "tests.embedding_backends.CrashesOnPoisonBackend"}
    with embeddings_deferred():
        for title in ("POISON pill", "Index foreign keys", "Keep migrations reversible"):
            lesson_create(team=team, title=title)
    result = embed_pending.call(kind="lessons", team_id=team.pk)
    # The three rows share one batch, which the encoder cannot embed: three rows, not one kind.
    assert result == {"embedded": 0, "failed": 3, "reason": "embedding failed: the encoder crashed"}


def test_embed_pending_with_the_model_off_reports_every_pending_row(team, settings):
    from lessons.tasks import embed_pending

    with embeddings_deferred():
        lesson_create(team=team, title="Index foreign keys")
        lesson_create(team=team, title="Keep migrations reversible")
    settings.EMBEDDINGS_ENABLED = False
    result = embed_pending.call(kind="lessons", team_id=team.pk)
    assert result["embedded"] == 0 and result["failed"] == 2
    assert "EMBEDDINGS_ENABLED=0" in result["reason"]
