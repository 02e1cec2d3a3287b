"""The duplicates pages: `/admin/lessons/lesson/duplicates/` and `/admin/lessons/memory/duplicates/`
(`?team=`, `?threshold=`, `?limit=`): pairs closer than the threshold, closest first, each with
"merge" (the curator picks which row to keep and, for lessons, whose text) and "not a duplicate"."""

from django import forms
from django.contrib import messages
from django.core.exceptions import ValidationError
from django.template.response import TemplateResponse
from django.urls import reverse

from lessons.admin.curation import back_to, chosen_team, page_context, post_int, refused, require, team_field
from lessons.models import DuplicateKind, Lesson, Memory
from lessons.selectors.curation import (
    DEFAULT_DUPLICATE_LIMIT,
    DEFAULT_DUPLICATE_THRESHOLD,
    MAX_DUPLICATE_LIMIT,
    MAX_DUPLICATE_THRESHOLD,
    lesson_duplicate_pairs,
    memory_duplicate_pairs,
)
from lessons.services import curation as curation_services


class DuplicatesFilter(forms.Form):
    team = team_field()
    threshold = forms.FloatField(
        min_value=0.01,
        max_value=MAX_DUPLICATE_THRESHOLD,
        required=False,
        widget=forms.NumberInput(attrs={"step": "0.01", "size": 5}),
        help_text="Cosine distance: 0.15 is similarity 0.85.",
    )
    limit = forms.IntegerField(min_value=1, max_value=MAX_DUPLICATE_LIMIT, required=False, widget=forms.NumberInput(attrs={"size": 4}))


def _filters(request) -> tuple[DuplicatesFilter, dict]:
    """The filter form (always bound: every field is optional) and the values to use. A field
    that does not validate shows its error and falls back to its default; an unknown team shows
    no pairs rather than another team's."""
    form = DuplicatesFilter(request.GET)
    form.is_valid()
    data = form.cleaned_data
    return form, {
        "team": None if "team" in form.errors else chosen_team(data.get("team")),
        "threshold": data.get("threshold") or DEFAULT_DUPLICATE_THRESHOLD,
        "limit": data.get("limit") or DEFAULT_DUPLICATE_LIMIT,
    }


def lesson_duplicates_view(model_admin, request):
    require(model_admin.has_view_permission(request))
    if request.method == "POST":
        return _lesson_action(model_admin, request)
    form, chosen = _filters(request)
    team = chosen["team"]
    pairs = lesson_duplicate_pairs(team=team, threshold=chosen["threshold"], limit=chosen["limit"]) if team else []
    context = page_context(
        model_admin,
        request,
        title="Duplicate lessons",
        subtitle=team.name if team else None,
        form=form,
        team=team,
        threshold=chosen["threshold"],
        similarity=1 - chosen["threshold"],
        limit=chosen["limit"],
        pairs=pairs,
        can_merge=model_admin.has_change_permission(request) and model_admin.has_delete_permission(request),
        kind="lesson",
    )
    return TemplateResponse(request, "admin/lessons/lesson/duplicates.html", context)


def _lesson_action(model_admin, request):
    fallback = reverse("admin:lessons_lesson_duplicates")
    action = request.POST.get("action")
    first, second = post_int(request, "first"), post_int(request, "second")
    if first is None or second is None:
        messages.error(request, "Name the two lessons of the pair.")
        return back_to(request, fallback)
    lessons = Lesson.objects.filter(pk__in=[first, second]).in_bulk()
    if len(lessons) != 2:
        messages.error(request, "One of these lessons no longer exists; the list below is up to date.")
        return back_to(request, fallback)
    if action == "dismiss":
        require(model_admin.has_change_permission(request))
        try:
            curation_services.duplicate_dismiss(
                team=lessons[first].team, kind=DuplicateKind.LESSON, first_id=first, second_id=second
            )
        except ValidationError as error:
            refused(request, error)
        else:
            messages.success(request, f"“{lessons[first]}” and “{lessons[second]}” are marked as not duplicates.")
        return back_to(request, fallback)
    if action == "merge":
        require(model_admin.has_change_permission(request) and model_admin.has_delete_permission(request))
        keep_id, text_id = post_int(request, "keep"), post_int(request, "text_from")
        if keep_id not in lessons or text_id not in lessons:
            messages.error(request, "Pick the lesson to keep and the lesson whose text to keep, both of this pair.")
            return back_to(request, fallback)
        other_id = second if keep_id == first else first
        try:
            kept = curation_services.lesson_merge(
                keep=lessons[keep_id], merged=[lessons[other_id]], text_from=lessons[text_id]
            )
        except ValidationError as error:
            refused(request, error)
        else:
            messages.success(
                request,
                f"Merged lesson #{other_id} into #{kept.pk} “{kept.title}”: frequency {kept.frequency}, "
                f"confidence {kept.confidence:.2f}.",
            )
        return back_to(request, fallback)
    messages.error(request, "Unknown action.")
    return back_to(request, fallback)


def memory_duplicates_view(model_admin, request):
    require(model_admin.has_view_permission(request))
    if request.method == "POST":
        return _memory_action(model_admin, request)
    form, chosen = _filters(request)
    team = chosen["team"]
    pairs = memory_duplicate_pairs(team=team, threshold=chosen["threshold"], limit=chosen["limit"]) if team else []
    context = page_context(
        model_admin,
        request,
        title="Duplicate memories",
        subtitle=team.name if team else None,
        form=form,
        team=team,
        threshold=chosen["threshold"],
        similarity=1 - chosen["threshold"],
        limit=chosen["limit"],
        pairs=pairs,
        can_merge=model_admin.has_change_permission(request) and model_admin.has_delete_permission(request),
        kind="memory",
    )
    return TemplateResponse(request, "admin/lessons/memory/duplicates.html", context)


def _memory_action(model_admin, request):
    fallback = reverse("admin:lessons_memory_duplicates")
    action = request.POST.get("action")
    first, second = post_int(request, "first"), post_int(request, "second")
    memories = Memory.objects.filter(pk__in=[first or 0, second or 0], current_version__isnull=True).in_bulk()
    if first is None or second is None or len(memories) != 2:
        messages.error(request, "One of these memories no longer exists; the list below is up to date.")
        return back_to(request, fallback)
    if action == "dismiss":
        require(model_admin.has_change_permission(request))
        try:
            curation_services.duplicate_dismiss(
                team=memories[first].team, kind=DuplicateKind.MEMORY, first_id=first, second_id=second
            )
        except ValidationError as error:
            refused(request, error)
        else:
            messages.success(request, "The two memories are marked as not duplicates.")
        return back_to(request, fallback)
    if action == "merge":
        require(model_admin.has_change_permission(request) and model_admin.has_delete_permission(request))
        keep_id = post_int(request, "keep")
        if keep_id not in memories:
            messages.error(request, "Pick the memory to keep, one of this pair.")
            return back_to(request, fallback)
        other_id = second if keep_id == first else first
        try:
            kept = curation_services.memory_merge(keep=memories[keep_id], merged=memories[other_id])
        except ValidationError as error:
            refused(request, error)
        else:
            messages.success(request, f"Merged memory #{other_id} into #{kept.pk} “{kept}”.")
        return back_to(request, fallback)
    messages.error(request, "Unknown action.")
    return back_to(request, fallback)
