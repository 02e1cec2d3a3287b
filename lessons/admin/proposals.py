"""The proposals queue: `/admin/lessons/lesson/proposals/` (`?team=`, `?page=`). Proposed lessons,
oldest first, each beside its three nearest confirmed lessons of the same team by meaning, with
one-click accept, reject, or merge into one of those neighbours (keeping its text or taking the
proposal's)."""

from django import forms
from django.contrib import messages
from django.core.paginator import Paginator
from django.core.exceptions import ObjectDoesNotExist, ValidationError
from django.template.response import TemplateResponse
from django.urls import reverse

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
from lessons.models import Lesson, LessonStatus
from lessons.selectors.curation import (
    proposal_count,
    proposal_queue,
    proposal_queue_team,
    proposals_waiting_by_team,
)
from lessons.services import curation as curation_services
from lessons.services import lessons as lesson_services

PAGE_SIZE = 10


class ProposalsFilter(forms.Form):
    team = team_field()
    page = forms.IntegerField(min_value=1, required=False)


def proposals_view(model_admin, request):
    require(model_admin.has_view_permission(request))
    if request.method == "POST":
        return _act(model_admin, request)
    waiting = proposals_waiting_by_team()
    asked = request.GET
    # Opened without a team (the index's "Review proposals"): the team with the most waiting, not
    # the first by name, which showed "Nothing to review" while another team had 16.
    if not asked.get("team") and (opening := proposal_queue_team()):
        asked = asked.copy()
        asked["team"] = opening.slug
    form = ProposalsFilter(asked)
    form.fields["team"].notes = {team_id: f"{count} waiting" for team_id, count in waiting.items()}
    form.is_valid()
    team = None if "team" in form.errors else chosen_team(form.cleaned_data.get("team"))
    total = proposal_count(team=team) if team else 0
    pages = max(1, -(-total // PAGE_SIZE))
    page = min(form.cleaned_data.get("page") or 1, pages)
    reviews = proposal_queue(team=team, limit=PAGE_SIZE, offset=(page - 1) * PAGE_SIZE) if team else []
    context = page_context(
        model_admin,
        request,
        title="Proposals to review",
        subtitle=team.name if team else None,
        form=form,
        team=team,
        reviews=reviews,
        total=total,
        page=page,
        pages=pages,
        first_shown=(page - 1) * PAGE_SIZE + 1,
        last_shown=(page - 1) * PAGE_SIZE + len(reviews),
        # The first and last pages and those around this one, as the admin's lists do: every page
        # number in one line made the page 3,800 px wide at 107 pages.
        page_range=list(Paginator(range(total), PAGE_SIZE).get_elided_page_range(page, on_each_side=2, on_ends=1)),
        ellipsis=Paginator.ELLIPSIS,
        can_change=model_admin.has_change_permission(request),
        can_merge=model_admin.has_change_permission(request) and model_admin.has_delete_permission(request),
    )
    return TemplateResponse(request, "admin/lessons/lesson/proposals.html", context)


def _act(model_admin, request):
    fallback = reverse("admin:lessons_lesson_proposals")
    require(model_admin.has_change_permission(request))
    proposal_id = post_int(request, "proposal")
    proposal = Lesson.objects.filter(pk=proposal_id or 0).first()
    if proposal is None or proposal.status != LessonStatus.PROPOSED:
        messages.warning(request, "That proposal has already been handled; the queue below is up to date.")
        return back_to(request, fallback)
    # Accept and reject are `action`; a merge button names the lesson to merge into.
    action = request.POST.get("action")
    into = post_int(request, "merge_into") or post_int(request, "merge_into_with_text")
    if into is not None:
        action = "merge_text" if "merge_into_with_text" in request.POST else "merge"
    try:
        # Accept and reject go through the locked bulk services: of two curators deciding the same
        # proposal at once, one decides and the other hears it was handled (both heard "done").
        if action in ("accept", "reject"):
            decide = (lesson_services.lesson_accept_proposals if action == "accept"
                      else lesson_services.lesson_reject_proposals)
            decided = decide(lesson_ids=[proposal.pk])
            if not decided:
                messages.warning(request, "That proposal has already been handled; the queue below is up to date.")
            elif action == "accept":
                log_curation(request, decided, "Accepted the proposal.")
                messages.success(request, f"Accepted “{proposal.title}”: it is a confirmed lesson now.")
            else:
                log_curation(request, decided, "Rejected the proposal.")
                messages.success(request, f"Rejected “{proposal.title}”.")
        elif action in ("merge", "merge_text"):
            require(model_admin.has_delete_permission(request))
            target = Lesson.objects.filter(pk=into).first()
            if target is None:
                messages.error(request, "The lesson to merge into no longer exists.")
                return back_to(request, fallback)
            # "merge" keeps the confirmed lesson's text, "merge_text" takes the proposal's.
            text_from = proposal if action == "merge_text" else target
            kept = curation_services.lesson_merge(keep=target, merged=[proposal], text_from=text_from)
            whose_text = "the proposal's text taken" if action == "merge_text" else "this lesson's text kept"
            log_curation(request, [kept], f"Merged proposal #{proposal.pk} “{proposal.title}” into this lesson "
                                          f"({whose_text}).")
            log_merged_away(request, proposal, f"Merged into lesson #{kept.pk} “{kept.title}”.")
            messages.success(
                request,
                f"Merged the proposal into #{kept.pk} “{kept.title}” (frequency {kept.frequency}, "
                f"confidence {kept.confidence:.2f}).",
            )
        else:
            messages.error(request, "Unknown action.")
    except (ValidationError, ObjectDoesNotExist) as error:  # the latter: a lesson deleted meanwhile
        refused(request, error)
    return back_to(request, fallback)
