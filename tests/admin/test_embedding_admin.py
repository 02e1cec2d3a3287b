from datetime import timedelta

import pytest
from django.test import override_settings
from django.urls import reverse
from django.utils import timezone
from django_tasks import TaskResultStatus

from lessons.admin.embeddings import SESSION_KEY
from lessons.models import Lesson, Memory
from lessons.selectors.embeddings import with_embedding_status
from lessons.services.embedding_jobs import EmbeddingJob
from lessons.services.embeddings import embedding_backfill, embeddings_deferred
from lessons.services.lessons import lesson_create
from lessons.services.memories import memory_create, memory_update

pytestmark = pytest.mark.django_db

LESSONS = reverse("admin:lessons_lesson_changelist")
MEMORIES = reverse("admin:lessons_memory_changelist")


def statuses(model) -> dict[int, str]:
    return dict(with_embedding_status(queryset=model.objects.all()).values_list("pk", "embedding_status"))


@pytest.fixture
def three_lessons(team):
    with embeddings_deferred():
        fresh = lesson_create(team=team, title="Fresh lesson about caching")
        stale = lesson_create(team=team, title="Stale lesson about retries")
        missing = lesson_create(team=team, title="Missing lesson about backups")
    embedding_backfill(ids=[fresh.pk, stale.pk], kind="lessons")
    Lesson.objects.filter(pk=stale.pk).update(title="Stale lesson about retries, edited")
    return fresh, stale, missing


def test_lesson_list_shows_and_filters_the_status(admin_client, three_lessons):
    response = admin_client.get(LESSONS)
    page = response.content.decode()
    assert page.count('<td class="field-embedding_status">Fresh</td>') == 1
    assert page.count('<td class="field-embedding_status">Stale</td>') == 1
    assert page.count('<td class="field-embedding_status">Missing</td>') == 1
    for status, title in [("stale", "Stale lesson"), ("missing", "Missing lesson"), ("fresh", "Fresh lesson")]:
        response = admin_client.get(LESSONS, {"embedding_status": status})
        assert response.context["cl"].result_count == 1
        assert title in response.content.decode()


def test_change_form_shows_model_and_time(admin_client, three_lessons):
    fresh = three_lessons[0]
    page = admin_client.get(reverse("admin:lessons_lesson_change", args=[fresh.pk])).content.decode()
    assert "sentence-transformers/all-MiniLM-L6-v2" in page
    assert "Fresh" in page


def test_reembed_action_queues_a_task_and_shows_its_progress(admin_client, three_lessons):
    fresh, stale, missing = three_lessons
    before = Lesson.objects.get(pk=fresh.pk).embedded_at
    response = admin_client.post(
        LESSONS, {"action": "reembed_selected", "_selected_action": [fresh.pk, stale.pk, missing.pk]}
    )
    assert response.status_code == 302 and "/admin/lessons/reembed/" in response["Location"]
    page = admin_client.get(response["Location"])
    assert page.status_code == 200
    html = page.content.decode()
    # The immediate backend (development, tests) has run the task already: 3 of 3, no reload.
    assert "<strong>3 of 3</strong> re-embedded" in html and "(100%)" in html
    assert "embedded 3, failed 0" in html and 'http-equiv="refresh"' not in html
    assert set(statuses(Lesson).values()) == {"fresh"}
    assert Lesson.objects.get(pk=fresh.pk).embedded_at > before  # re-embedded, though it was fresh


def test_reembed_action_with_the_model_off_reports_the_failure(admin_client, three_lessons):
    _, stale, missing = three_lessons
    with override_settings(EMBEDDINGS_ENABLED=False):
        response = admin_client.post(
            LESSONS, {"action": "reembed_selected", "_selected_action": [stale.pk, missing.pk]}, follow=True
        )
    html = response.content.decode()
    assert "<strong>0 of 2</strong> re-embedded" in html and "2 to go" in html
    assert "embedded 0, failed 2" in html and "turned off" in html and 'class="errornote"' in html
    assert 'http-equiv="refresh"' not in html  # the task has ended: no endless reloading
    assert statuses(Lesson)[missing.pk] == "missing"
    # what to do next, true for fresh rows too ("they stay pending for the next backfill" was not:
    # a backfill leaves a fresh row alone)
    assert "They keep the vectors they had" in html and "again once the model is available" in html


def test_memory_list_status_filter_and_action_on_versions(admin_client, team):
    with embeddings_deferred():
        memory = memory_create(team=team, content="Tom plays bass")
        memory = memory_update(memory=memory, content="Tom plays double bass")
    version = Memory.objects.get(current_version=memory)
    response = admin_client.get(MEMORIES, {"embedding_status": "missing"})
    assert response.context["cl"].result_count == 1  # current memories only, by default
    response = admin_client.get(MEMORIES, {"embedding_status": "missing", "version_state": "earlier"})
    assert response.context["cl"].result_count == 1
    response = admin_client.post(
        MEMORIES + "?version_state=earlier",
        {"action": "reembed_selected", "_selected_action": [version.pk]},
        follow=True,
    )
    assert "<strong>1 of 1</strong> re-embedded" in response.content.decode()
    assert statuses(Memory) == {memory.pk: "missing", version.pk: "fresh"}


def test_admin_edit_of_a_lesson_saves_and_re_embeds(admin_client, team, django_capture_on_commit_callbacks):
    with embeddings_deferred():
        lesson = lesson_create(team=team, title="Pin base images", category="deployment")
    form = {
        "team": team.pk,
        "external_id": "",
        "title": "Pin base images by digest",
        "category": "deployment",
        "status": "confirmed",
        "description": "",
        "context": "",
        "recommendation": "",
        "confidence": 0.5,
        "frequency": 1,
        "project_types": "",
        "tech_stacks": "",
        "tags": "",
    }
    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        response = admin_client.post(reverse("admin:lessons_lesson_change", args=[lesson.pk]), form)
    assert response.status_code == 302, response.content.decode()[:2000]
    assert len(callbacks) == 1
    assert Lesson.objects.get(pk=lesson.pk).title == "Pin base images by digest"
    assert statuses(Lesson) == {lesson.pk: "fresh"}


def test_reembed_progress_counts_rows_embedded_since_the_job_was_queued(team):
    from django.utils import timezone

    from lessons.selectors.embedding_jobs import embedding_job_progress
    from lessons.services.embedding_jobs import EmbeddingJob

    with embeddings_deferred():
        first = lesson_create(team=team, title="Queue slow work")
        second = lesson_create(team=team, title="Cap retries")
        gone = lesson_create(team=team, title="Deleted while queued")
    job = EmbeddingJob(kind="lessons", ids=[first.pk, second.pk, gone.pk], queued_at=timezone.now())
    gone.delete()
    progress = embedding_job_progress(job=job)
    assert (progress.done, progress.remaining, progress.gone, progress.finished) == (0, 2, 1, False)
    embedding_backfill(kind="lessons", ids=[first.pk])
    progress = embedding_job_progress(job=job)
    assert (progress.done, progress.remaining, progress.percent) == (1, 1, 67)
    # A job survives the session's JSON round trip.
    assert EmbeddingJob.from_dict(job.as_dict()) == job


def test_a_job_page_of_an_unknown_job_is_404(admin_client):
    assert admin_client.get(reverse("admin:lessons_embedding_job", args=["not-a-job"])).status_code == 404


def _job_page(admin_client, job) -> str:
    session = admin_client.session
    session[SESSION_KEY] = {"job": job.as_dict()}
    session.save()
    return admin_client.get(reverse("admin:lessons_embedding_job", args=["job"])).content.decode()


def test_a_running_job_without_progress_for_minutes_says_its_worker_has_probably_stopped(admin_client, three_lessons):
    """A worker killed mid-task leaves it RUNNING: the page said "running" for ever, reloading."""
    ids = [lesson.pk for lesson in three_lessons]
    Lesson.objects.filter(pk__in=ids, embedded_at__isnull=False).update(embedded_at=timezone.now() - timedelta(hours=1))
    stalled = EmbeddingJob(kind="lessons", ids=ids, queued_at=timezone.now() - timedelta(minutes=12),
                           status=TaskResultStatus.RUNNING)
    html = _job_page(admin_client, stalled)
    assert "No row has been re-embedded for 12 minutes" in html
    assert "requeue_stalled_tasks --older-than 12" in html
    # just queued, or a row embedded a moment ago: running, not stalled
    assert "No row has been re-embedded" not in _job_page(
        admin_client, EmbeddingJob(kind="lessons", ids=ids, queued_at=timezone.now(), status=TaskResultStatus.RUNNING))
    embedding_backfill(kind="lessons", ids=ids[:1], include_fresh=True)
    assert "No row has been re-embedded" not in _job_page(admin_client, stalled)
