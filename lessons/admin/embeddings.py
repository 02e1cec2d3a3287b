"""The embedding status in the admin lists (computed in SQL, see lessons.selectors.embeddings), a
filter on it, and the "Re-embed selected" action: it queues a task (lessons.services.embedding_jobs)
and shows a page with the job's progress, read from the rows; the job itself is read back from the
task queue (or the session, with a queue that keeps no results)."""

import uuid
from datetime import timedelta
from urllib.parse import urlencode

from django.contrib import admin, messages
from django.contrib.admin.templatetags.admin_urls import add_preserved_filters
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils import timezone
from django_tasks import TaskResultStatus

from lessons.models import EmbeddingStatus
from lessons.selectors.embedding_jobs import embedding_job_from_queue, embedding_job_progress
from lessons.selectors.embeddings import EMBEDDED_KINDS, with_embedding_status
from lessons.services.embedding_jobs import EmbeddingJob, embedding_job_enqueue
from lessons.services.embeddings import embedding_kind

STALLED_AFTER = timedelta(minutes=5)  # a running job without a row embedded for this long: the worker is gone


class EmbeddingStatusFilter(admin.SimpleListFilter):
    title = "embedding"
    parameter_name = "embedding_status"

    def lookups(self, request, model_admin):
        return EmbeddingStatus.choices

    def queryset(self, request, queryset):
        if self.value() in EmbeddingStatus.values:
            return queryset.filter(embedding_status=self.value())
        return queryset


class EmbeddingAdminMixin:
    """For the admin classes of rows that carry an embedding. Put it before ModelAdmin."""

    def get_queryset(self, request):
        # The vectors are never shown; parsing 100 of them cost a list page ~50 ms.
        queryset = super().get_queryset(request).defer("embedding", "search_vector")
        return with_embedding_status(queryset=queryset)

    @admin.display(description="embedding", ordering="embedding_status")
    def embedding_status(self, obj):
        status = getattr(obj, "embedding_status", None)  # absent on the add form's unsaved row
        return EmbeddingStatus(status).label if status else "-"


    @admin.action(description="Re-embed selected (in the background)", permissions=["change"])
    def reembed_selected(self, request, queryset):
        ids = list(queryset.values_list("pk", flat=True))
        job = embedding_job_enqueue(kind=embedding_kind(queryset.model()), ids=ids)
        if job.error:
            self.message_user(request, f"Re-embedding {len(ids)} row(s) {job.error}", messages.ERROR)
            return None
        # the list's filters, search and order ride along (as `_changelist_filters`, Django's way) for the way back
        url = reverse("admin:lessons_embedding_job", args=[remember_job(request, job)])
        preserved = self.get_preserved_filters(request)
        return HttpResponseRedirect(f"{url}?{preserved}" if preserved else url)


# --- the job's status page -----------------------------------------------------------------------

SESSION_KEY = "embedding_jobs"
KEPT_JOBS = 10


def remember_job(request, job: EmbeddingJob) -> str:
    """Keep the job in the curator's session (the last few) and return its token: the task's id.
    The session is the job's only record with the immediate backend (development, tests), which
    forgets a task once it has run; the database queue keeps it for every curator."""
    token = job.task_id or uuid.uuid4().hex
    jobs = request.session.get(SESSION_KEY, {})
    jobs[token] = job.as_dict()
    request.session[SESSION_KEY] = dict(list(jobs.items())[-KEPT_JOBS:])
    return token


def embedding_job_view(request, token: str):
    """Open to any curator who may see the job's kind of rows (the admin's permissions are per model,
    every team's rows alike): the job used to be read from the session only, so a colleague, or the
    same curator signed in again, got a 404 for a job the queue still held."""
    queued = embedding_job_from_queue(task_id=token)
    if queued is not None:
        job, started_at = queued.job, queued.started_at
    else:
        data = request.session.get(SESSION_KEY, {}).get(token)
        if data is None:
            raise Http404("no such re-embedding job")
        # the immediate backend's, or one pruned from the database queue: as the action left it
        job, started_at = EmbeddingJob.from_dict(data), None
    model = EMBEDDED_KINDS[job.kind]
    if not admin.site.get_model_admin(model).has_view_permission(request):
        raise PermissionDenied(f"re-embedding {model._meta.verbose_name_plural} is not theirs to watch")
    progress = embedding_job_progress(job=job)
    failed = job.status == TaskResultStatus.FAILED or bool(job.outcome.get("failed"))
    if job.status == TaskResultStatus.SUCCESSFUL and not progress.finished:
        failed = True
    # A worker killed mid-task leaves it RUNNING, and this page said "running" for ever. A batch
    # takes seconds: minutes without a row embedded say the worker is gone.
    now = timezone.now()
    quiet = now - max(moment for moment in (progress.last_done_at, started_at, job.queued_at) if moment)
    stalled_minutes = running_minutes = None
    if job.status == TaskResultStatus.RUNNING and not progress.finished and quiet >= STALLED_AFTER:
        stalled_minutes = int(quiet.total_seconds() // 60)
        # what requeue_stalled_tasks measures: the time since a worker took the task
        running_minutes = int((now - (started_at or job.queued_at)).total_seconds() // 60)
    context = {
        **admin.site.each_context(request),
        "title": f"Re-embedding {progress.total} "
                 f"{model._meta.verbose_name if progress.total == 1 else model._meta.verbose_name_plural}",
        "subtitle": None,
        "job": job,
        "progress": progress,
        "failed": failed,
        "stalled_minutes": stalled_minutes,
        "running_minutes": running_minutes,
        # Reload while the queue still has the task; a task that ended with rows left has failed them.
        "refresh": not progress.finished and job.status in (TaskResultStatus.READY, TaskResultStatus.RUNNING),
        "opts": model._meta,
        # back to the list as it was when the action ran, as the admin's change form leads back
        "changelist_url": add_preserved_filters(
            {"preserved_filters": _changelist_filters(request), "opts": model._meta},
            reverse(f"admin:lessons_{model._meta.model_name}_changelist"),
        ),
    }
    return TemplateResponse(request, "admin/lessons/embedding_job.html", context)


def _changelist_filters(request) -> str:
    """The list's query string the action was run from, as the admin's preserved filters."""
    filters = request.GET.get("_changelist_filters")
    return urlencode({"_changelist_filters": filters}) if filters else ""

