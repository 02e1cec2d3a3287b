from django.contrib import admin, messages
from django.contrib.admin import helpers
from django.contrib.admin.actions import delete_selected as django_delete_selected
from django.template.response import TemplateResponse
from django.urls import path

from lessons.admin.common import (
    CheckedSelectionModelAdmin,
    MergedAwayMixin,
    ReadableInputsMixin,
    TeamChosenOnceMixin,
    TeamLabelsMixin,
    WideChangeListMixin,
    changed_values,
    selection_too_large,
    term_normalisation_notice,
)
from lessons.admin.curation import log_curation
from lessons.admin.duplicates import lesson_duplicates_view
from lessons.admin.proposals import proposals_view
from lessons.admin.embeddings import EmbeddingAdminMixin, EmbeddingStatusFilter
from lessons.admin.search import CuratedTeamFilter, EngineSearchMixin, lesson_search_filters
from lessons.admin.usage import USAGE_FIELDS, USAGE_LIST_FIELDS
from lessons.models import Lesson, LessonStatus
from lessons.selectors.curation import lesson_merged_into
from lessons.services import lessons as lesson_services


@admin.register(Lesson)
class LessonAdmin(
    MergedAwayMixin, TeamChosenOnceMixin, TeamLabelsMixin, ReadableInputsMixin, WideChangeListMixin, EngineSearchMixin,
    EmbeddingAdminMixin, CheckedSelectionModelAdmin,
):
    list_display = (
        "title", "team_label", "category", "status", "confidence_rounded", "frequency", *USAGE_LIST_FIELDS,
        "embedding_status", "updated_at",
    )
    list_filter = ("status", "category", CuratedTeamFilter, EmbeddingStatusFilter)
    search_fields = ("title", "description", "recommendation", "external_id", "tags", "tech_stacks")
    list_select_related = ("team",)
    list_per_page = 50  # a page renders in well under 300 ms; 100 rows took twice that
    readonly_fields = (
        "created_at", "updated_at", "embedding_status", "embedding_model", "embedded_at", "content_hash", *USAGE_FIELDS
    )
    actions = ("delete_selected", "accept_selected", "reject_selected", "reembed_selected")
    fieldsets = (
        (None, {"fields": ("team", "external_id", "title", "category", "status")}),
        ("Lesson", {"fields": ("description", "context", "recommendation")}),
        ("Signals", {"fields": ("confidence", "frequency", "project_types", "tech_stacks", "tags")}),
        ("Usage (reported by agents)", {"fields": USAGE_FIELDS}),
        ("Embedding", {"fields": ("embedding_status", "embedding_model", "embedded_at", "content_hash")}),
        ("Timestamps", {"fields": ("created_at", "updated_at")}),
    )

    search_kind = "lessons"
    wide_fields = ("title",)

    def engine_search_filters(self, request):
        return lesson_search_filters(request)

    # Two decimals in the list: a confidence an agent computed (1/3, "0.3333333333333333") made its
    # column ~140 px wide and pushed the last column out of the table's box. The form keeps it whole.
    @admin.display(description="confidence", ordering="confidence")
    def confidence_rounded(self, obj):
        return f"{obj.confidence:.2f}" if obj.confidence is not None else "-"

    def save_model(self, request, obj, form, change):
        fields = {name: form.cleaned_data[name] for name in lesson_services.EDITABLE_FIELDS if name in form.cleaned_data}
        if change:
            # The form has already written the new values onto `obj`; compare with the stored row.
            stored = Lesson.objects.get(pk=obj.pk)
            saved = lesson_services.lesson_update(lesson=stored, **changed_values(form))
        else:
            saved = lesson_services.lesson_create(team=form.cleaned_data["team"], **fields)
            obj.__dict__.update(saved.__dict__)  # the admin goes on with the saved row
        terms = ("category", *lesson_services.TERM_FIELDS)
        notice = term_normalisation_notice(form=form, saved=saved, field_names=terms)
        if notice:
            self.message_user(request, notice, messages.INFO)

    def merged_into(self, *, row_id):
        record = lesson_merged_into(lesson_id=row_id)
        return (record.lesson, record.merged_at) if record else None

    def delete_model(self, request, obj):
        lesson_services.lesson_delete(lesson=obj)

    def delete_queryset(self, request, queryset):
        lesson_services.lesson_delete_many(lessons=queryset)

    @admin.action(description="Accept selected proposals…", permissions=["change"])
    def accept_selected(self, request, queryset):
        """Asks first, listing what will change; only proposals are accepted."""
        # only the proposals are posted back by the confirmation, so only they count against its size
        if selection_too_large(self, request, queryset.filter(status=LessonStatus.PROPOSED)):
            return None
        selected = list(queryset.select_related("team").order_by("title"))
        proposals = [lesson for lesson in selected if lesson.status == LessonStatus.PROPOSED]
        if not proposals:
            self.message_user(request, _no_proposal_left(request, selected), messages.WARNING)
            return None
        if request.POST.get("confirm") == "yes":
            accepted = lesson_services.lesson_accept_proposals(lesson_ids=[lesson.pk for lesson in proposals])
            log_curation(request, accepted, "Accepted the proposal.")
            self.message_user(request, _accepted_message(request, selected, accepted), messages.SUCCESS)
            return None
        context = {
            **self.admin_site.each_context(request),
            "title": "Accept proposals?",
            "subtitle": None,
            "opts": self.model._meta,
            "proposals": proposals,
            "skipped": [lesson for lesson in selected if lesson.status != LessonStatus.PROPOSED],
            "action": "accept_selected",
            "action_checkbox_name": helpers.ACTION_CHECKBOX_NAME,
        }
        return TemplateResponse(request, "admin/lessons/lesson/accept_confirmation.html", context)

    @admin.action(description=django_delete_selected.short_description, permissions=["delete"])
    def delete_selected(self, request, queryset):
        if selection_too_large(self, request, queryset):
            return None
        return django_delete_selected(self, request, queryset)

    @admin.action(description="Reject selected proposals", permissions=["change"])
    def reject_selected(self, request, queryset):
        selected = list(queryset.values_list("pk", flat=True))
        rejected = lesson_services.lesson_reject_proposals(lesson_ids=selected)
        log_curation(request, rejected, "Rejected the proposal.")
        gone = _gone_count(request, selected)
        if not rejected:
            none_left = "None of the selected lessons is a proposal: nothing to reject."
            self.message_user(request, _with_gone(none_left, gone), messages.WARNING)
            return
        text = f"{len(rejected)} proposal(s) rejected."
        if len(rejected) < len(selected):
            text += (f" {len(selected) - len(rejected)} selected lesson(s) were not proposals and were left alone"
                     " (a confirmed lesson is retired on its own page).")
        self.message_user(request, _with_gone(text, gone), messages.SUCCESS)

    def get_urls(self):
        # The curation pages (lessons/admin/proposals.py, duplicates.py), before the "<id>/" patterns.
        view = self.admin_site.admin_view
        return [
            path("proposals/", view(lambda request: proposals_view(self, request)), name="lessons_lesson_proposals"),
            path("duplicates/", view(lambda request: lesson_duplicates_view(self, request)), name="lessons_lesson_duplicates"),
            *super().get_urls(),
        ]


def _gone_count(request, selected_ids) -> int:
    """How many of the posted ids name no row any more (merged or deleted since the page was made);
    the action's rows are every lesson with a posted id, whatever the list's filters
    (CheckedSelectionModelAdmin), so a row decided meanwhile is among them, not gone. "Select all"
    takes the list's rows rather than the posted ones: none of those is gone."""
    if request.POST.get("select_across") == "1":
        return 0
    asked = {int(value) for value in request.POST.getlist(helpers.ACTION_CHECKBOX_NAME)}  # ids, checked before
    return len(asked - set(selected_ids))


def _gone_phrase(gone: int) -> str:
    return f"{gone} no longer {'exists' if gone == 1 else 'exist'} (merged or deleted)"


def _with_gone(text: str, gone: int) -> str:
    return f"{text} {_gone_phrase(gone)}." if gone > 0 else text


def _accepted_message(request, selected: list, accepted: list) -> str:
    """What the confirmation's "Yes" did. It posts back only the proposals it listed, so each posted
    id not accepted was decided, merged or deleted since: counted against the rebuilt list, one
    rejected from another tab meanwhile went unmentioned (and on a list filtered to proposals, where
    it had dropped out of the rebuilt list, it was said to be merged or deleted)."""
    decided = len(selected) - len(accepted)
    text = f"{len(accepted)} proposal(s) accepted."
    if decided > 0:
        text += f" {decided} had changed status meanwhile and {'was' if decided == 1 else 'were'} left alone."
    return _with_gone(text, _gone_count(request, [lesson.pk for lesson in selected]))


def _no_proposal_left(request, selected: list) -> str:
    """Why there is nothing to accept. On the confirmation page's "Yes", the selection was all
    proposals when the page was made: "none is a proposal" sounded as if the curator had picked
    the wrong rows, when they had been decided or merged meanwhile."""
    if request.POST.get("confirm") != "yes":
        return "None of the selected lessons is a proposal: nothing to accept."
    gone = _gone_count(request, [lesson.pk for lesson in selected])
    parts = [f"{len(selected)} {'was' if len(selected) == 1 else 'were'} accepted or rejected"] if selected else []
    parts += [_gone_phrase(gone)] if gone > 0 else []
    return f"Nothing to accept: since this page was opened, {' and '.join(parts) or 'they changed'}."
