"""A memory's history on its admin page: every version, oldest to newest, with a word-level diff
against the version before, and "restore this version" (a POST to
`/admin/lessons/memory/<id>/versions/<version id>/restore/`). The history is drawn by the
`memory_history` template tag (lessons/templatetags/curation.py) in the memory's change form."""

from django.contrib import messages
from django.core.exceptions import ValidationError
from django.http import HttpResponseNotAllowed, HttpResponseRedirect
from django.shortcuts import get_object_or_404
from django.urls import reverse
from django.utils.dateparse import parse_datetime

from lessons.admin.curation import log_curation, refused, require
from lessons.models import Memory
from lessons.services import curation as curation_services


def restore_version_view(model_admin, request, memory_id: int, version_id: int):
    if request.method in ("GET", "HEAD"):  # a link opened in a tab: the history has the button
        messages.info(request, "Restoring is a button in the memory's history: press it there.")
        return HttpResponseRedirect(reverse("admin:lessons_memory_change", args=[memory_id]) + "#history")
    if request.method != "POST":
        return HttpResponseNotAllowed(["POST"])
    memory = get_object_or_404(Memory, pk=memory_id, current_version__isnull=True)
    require(model_admin.has_change_permission(request, memory))
    version = get_object_or_404(Memory, pk=version_id, current_version=memory)
    before = memory.version
    try:
        restored = curation_services.memory_restore_version(
            memory=memory, version=version, seen_updated_at=_seen_updated_at(request)
        )
    except (ValidationError, Memory.DoesNotExist) as error:  # the latter: merged or deleted meanwhile
        refused(request, error)
    else:
        if restored.version == before:
            messages.info(request, f"Version {version.version} already says what the memory says now; nothing changed.")
        else:
            log_curation(
                request, [restored], f"Restored version {version.version} (the replaced text is version {before})."
            )
            messages.success(
                request,
                f"Restored the text of version {version.version}: it is version {restored.version} now, and the text "
                f"it replaced is kept as version {before}.",
            )
    return HttpResponseRedirect(reverse("admin:lessons_memory_change", args=[memory.pk]) + "#history")


def _seen_updated_at(request):
    """The memory's `updated_at` when the page with the button was drawn (a hidden field): a
    restore from a stale tab is refused instead of replacing a newer edit. A form without it (an
    older page) is not checked."""
    try:
        return parse_datetime(request.POST.get("seen_updated_at", ""))
    except ValueError:
        return None
