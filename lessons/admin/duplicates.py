"""The duplicates pages: `/admin/lessons/lesson/duplicates/` and `/admin/lessons/memory/duplicates/`
(`?team=`, `?threshold=`, `?limit=`): pairs closer than the threshold, closest first, each with
"merge" (the curator picks which row to keep and, for lessons, whose text) and "not a duplicate"."""

from collections.abc import Callable
from dataclasses import dataclass

from django import forms
from django.contrib import messages
from django.core.exceptions import ObjectDoesNotExist, ValidationError
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils.http import urlencode

from lessons.admin.curation import (
    back_to,
    chosen_team,
    log_curation,
    log_merged_away,
    page_context,
    post_int,
    refused,
    require,
    team_field,
)
from lessons.models import DuplicateDismissal, DuplicateKind, Lesson, LessonStatus, Memory
from lessons.selectors.curation import (
    DEFAULT_DUPLICATE_LIMIT,
    DEFAULT_DUPLICATE_THRESHOLD,
    MAX_DUPLICATE_LIMIT,
    MAX_DUPLICATE_THRESHOLD,
    duplicates_opening_team,
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


def _filters(request, page: "DuplicatesPage") -> tuple[DuplicatesFilter, dict]:
    """The filter form (always bound: every field is optional) and the values to use. A field
    that does not validate shows its error and no pairs are looked for (the page then shows the
    errors alone: "0 pairs closer than 0.15" under "Threshold: enter a number" claimed a search
    that was not the one asked for); an unknown team shows no pairs rather than another team's."""
    asked = request.GET
    # Opened without a team (the index's and the list's links): the team with the most rows that can
    # pair, as the proposals page opens on the most proposals; the first by slug was `acme` with one
    # lesson, "No two lessons in acme are closer than 0.15", while `demo` had 196.
    if not asked.get("team") and (opening := duplicates_opening_team(kind=page.team_rows)):
        asked = asked.copy()
        asked["team"] = opening.slug
    form = DuplicatesFilter(asked)
    form.is_valid()
    data = form.cleaned_data
    return form, {
        "team": None if "team" in form.errors else chosen_team(data.get("team")),
        "threshold": data.get("threshold") or DEFAULT_DUPLICATE_THRESHOLD,
        "limit": data.get("limit") or DEFAULT_DUPLICATE_LIMIT,
    }


@dataclass(frozen=True)
class DuplicatesPage:
    """What differs between the lesson and the memory page."""

    kind: str  # "lesson" | "memory"
    title: str
    pairs: Callable  # the selector: (team, threshold, limit) -> pairs
    rows: Callable[[list[int]], dict]  # the pair's rows by id (merge-able ones only)
    duplicate_kind: str
    merge: Callable  # (request, rows, first, second, fallback) -> response
    team_rows: str  # the team's rows, from Team ("lessons"): which team the page opens on

    @property
    def plural(self) -> str:
        return {"lesson": "lessons", "memory": "memories"}[self.kind]


def lesson_duplicates_view(model_admin, request):
    return _duplicates_view(model_admin, request, LESSON_PAGE)


def memory_duplicates_view(model_admin, request):
    return _duplicates_view(model_admin, request, MEMORY_PAGE)


def _duplicates_view(model_admin, request, page: DuplicatesPage):
    require(model_admin.has_view_permission(request))
    if request.method == "POST":
        return _action(model_admin, request, page)
    form, chosen = _filters(request, page)
    team = None if form.errors else chosen["team"]
    pairs = page.pairs(team=team, threshold=chosen["threshold"], limit=chosen["limit"]) if team else []
    context = page_context(
        model_admin,
        request,
        title=page.title,
        subtitle=team.name if team else None,
        form=form,
        team=team,
        threshold=chosen["threshold"],
        similarity=1 - chosen["threshold"],
        limit=chosen["limit"],
        pairs=pairs,
        can_dismiss=model_admin.has_change_permission(request),
        dismissed=_dismissed_marks(team=team, kind=page.duplicate_kind) if team else None,
        can_merge=model_admin.has_change_permission(request) and model_admin.has_delete_permission(request),
        kind=page.kind,
    )
    return TemplateResponse(request, f"admin/lessons/{page.kind}/duplicates.html", context)


def _dismissed_marks(*, team, kind: str) -> dict:
    """How many pairs of this team are marked "not a duplicate", and where to take a mark back."""
    query = urlencode({"kind__exact": kind, "team__id__exact": team.pk})
    return {
        "count": DuplicateDismissal.objects.filter(team=team, kind=kind).count(),
        "url": f"{reverse('admin:lessons_duplicatedismissal_changelist')}?{query}",
    }


def _action(model_admin, request, page: DuplicatesPage):
    """A pair's form: "dismiss" (not duplicates) or "merge"; both rows must still exist."""
    fallback = reverse(f"admin:lessons_{page.kind}_duplicates")
    action = request.POST.get("action")
    first, second = post_int(request, "first"), post_int(request, "second")
    if first is None or second is None:
        messages.error(request, f"Name the two {page.plural} of the pair.")
        return back_to(request, fallback)
    if first == second:
        messages.error(request, f"A pair is two different {page.plural}; both ids here are {first}.")
        return back_to(request, fallback)
    rows = page.rows([first, second])
    if len(rows) != 2:
        messages.error(request, f"One of these {page.plural} no longer exists (or is an earlier version); "
                                "the list below is up to date.")
        return back_to(request, fallback)
    if action == "dismiss":
        require(model_admin.has_change_permission(request))
        try:
            curation_services.duplicate_dismiss(
                team=rows[first].team, kind=page.duplicate_kind, first_id=first, second_id=second,
                names_other_teams=True,
            )
        except ValidationError as error:
            refused(request, error)
        else:
            messages.success(
                request, f"#{first} “{rows[first]}” and #{second} “{rows[second]}” are marked as not duplicates."
            )
        return back_to(request, fallback)
    if action == "merge":
        require(model_admin.has_change_permission(request) and model_admin.has_delete_permission(request))
        return page.merge(request, rows, first, second, fallback)
    messages.error(request, "Unknown action.")
    return back_to(request, fallback)


def _merge_lessons(request, lessons: dict, first: int, second: int, fallback: str):
    keep_id, text_id = post_int(request, "keep"), post_int(request, "text_from")
    if keep_id not in lessons or text_id not in lessons:
        messages.error(request, "Pick the lesson to keep and the lesson whose text to keep, both of this pair.")
        return back_to(request, fallback)
    other_id = second if keep_id == first else first
    try:
        kept = curation_services.lesson_merge(
            keep=lessons[keep_id], merged=[lessons[other_id]], text_from=lessons[text_id]
        )
    except (ValidationError, ObjectDoesNotExist) as error:
        refused(request, error)
    else:
        merged = lessons[other_id]
        whose_text = "its text taken" if text_id == other_id else "this lesson's text kept"
        log_curation(request, [kept],
                     f"Merged lesson #{other_id} “{merged.title}” into this lesson ({whose_text}).")
        log_merged_away(request, merged, f"Merged into lesson #{kept.pk} “{kept.title}”.")
        messages.success(
            request,
            f"Merged lesson #{other_id} into #{kept.pk} “{kept.title}”: frequency {kept.frequency}, "
            f"confidence {kept.confidence:.2f}.{_status_change(before=lessons[keep_id], after=kept)}",
        )
    return back_to(request, fallback)


def _status_change(*, before: Lesson, after: Lesson) -> str:
    """What the merge did to the kept lesson's status: a kept proposal that a confirmed lesson was
    merged into is confirmed (lesson_merge never hides confirmed knowledge), and agents find it from
    now on; the message said only its frequency and confidence."""
    if before.status == after.status:
        return ""
    found = ": agents find it in their searches from now on" if after.status == LessonStatus.CONFIRMED else ""
    return f" #{after.pk} was {before.status} and is now {after.status}{found}."


def _merge_memories(request, memories: dict, first: int, second: int, fallback: str):
    keep_id = post_int(request, "keep")
    if keep_id not in memories:
        messages.error(request, "Pick the memory to keep, one of this pair.")
        return back_to(request, fallback)
    other_id = second if keep_id == first else first
    try:
        kept = curation_services.memory_merge(keep=memories[keep_id], merged=memories[other_id])
    except (ValidationError, ObjectDoesNotExist) as error:
        refused(request, error)
    else:
        log_curation(request, [kept], f"Merged memory #{other_id} “{memories[other_id]}” into this memory.")
        log_merged_away(request, memories[other_id], f"Merged into memory #{kept.pk}.")
        messages.success(request, f"Merged memory #{other_id} into #{kept.pk} “{kept}”; #{other_id} is deleted "
                                  "with its versions")  # no full stop: the memory's text may end with one
    return back_to(request, fallback)


LESSON_PAGE = DuplicatesPage(
    kind="lesson",
    title="Duplicate lessons",
    pairs=lesson_duplicate_pairs,
    rows=lambda ids: Lesson.objects.filter(pk__in=ids).in_bulk(),
    duplicate_kind=DuplicateKind.LESSON,
    merge=_merge_lessons,
    team_rows="lessons",
)
MEMORY_PAGE = DuplicatesPage(
    kind="memory",
    title="Duplicate memories",
    pairs=memory_duplicate_pairs,
    rows=lambda ids: Memory.objects.filter(pk__in=ids, current_version__isnull=True).in_bulk(),  # versions cannot merge
    duplicate_kind=DuplicateKind.MEMORY,
    merge=_merge_memories,
    team_rows="memories",
)
