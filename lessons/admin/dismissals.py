"""Pairs marked "not a duplicate", listed so a curator can take a mark back (delete it): the pair
then shows among the duplicates again. Marks are made on the duplicates pages, not here.

Whoever may make a mark may take it back: a curator with change permission on lessons sees and
deletes the lesson marks, on memories the memory marks, without a permission of this model's own."""

from django.contrib import admin
from django.db.models import Case, OuterRef, Subquery, TextField, When
from django.urls import reverse
from django.utils.html import format_html
from django.utils.text import Truncator

from lessons.admin.common import CheckedSelectionModelAdmin, TeamFilter, TeamLabelsMixin
from lessons.admin.curation import team_label
from lessons.models import DuplicateDismissal, DuplicateKind, Lesson, Memory
from lessons.selectors.admin_search import admin_teams

MARKED_MODELS = {DuplicateKind.LESSON: Lesson, DuplicateKind.MEMORY: Memory}


def _curated_kinds(request) -> list[str]:
    return [
        kind for kind, model in MARKED_MODELS.items()
        if request.user.has_perm(f"{model._meta.app_label}.change_{model._meta.model_name}")
    ]


class CuratedTeamFilter(TeamFilter):
    """The team filter without evaluation teams (`eval-*`), as the other lists offer teams: their
    benchmark corpora are not curated. A link naming one (`team__id__exact`) still filters."""

    def field_choices(self, field, request, model_admin):
        return [(team.pk, team_label(team)) for team in admin_teams()]


@admin.register(DuplicateDismissal)
class DuplicateDismissalAdmin(TeamLabelsMixin, CheckedSelectionModelAdmin):
    # the two rows by their titles (a memory: its text), linked: two bare ids did not say which
    # pair a mark was, so a curator could not tell which one to take back
    list_display = ("kind", "first_row", "second_row", "team_label", "dismissed_at")
    list_filter = ("kind", ("team", CuratedTeamFilter))
    list_select_related = ("team",)
    # the team shown as on the lesson pages (TeamLabelsMixin): linked only for a curator who may open it
    readonly_fields = ("team", "kind", "low_id", "high_id", "dismissed_at")

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_view_permission(self, request, obj=None):
        return super().has_view_permission(request, obj) or self._curates(request, obj)

    def has_delete_permission(self, request, obj=None):
        return super().has_delete_permission(request, obj) or self._curates(request, obj)

    def get_queryset(self, request):
        queryset = super().get_queryset(request).annotate(low_text=_text_of("low_id"), high_text=_text_of("high_id"))
        if super().has_view_permission(request) or super().has_delete_permission(request):
            return queryset
        return queryset.filter(kind__in=_curated_kinds(request))

    @staticmethod
    def _curates(request, obj) -> bool:
        kinds = _curated_kinds(request)
        return bool(kinds) if obj is None else obj.kind in kinds

    @admin.display(description="first", ordering="low_id")
    def first_row(self, obj):
        return _row_link(obj, obj.low_id, getattr(obj, "low_text", None))

    @admin.display(description="second", ordering="high_id")
    def second_row(self, obj):
        return _row_link(obj, obj.high_id, getattr(obj, "high_text", None))


def _text_of(id_field: str):
    """The marked row's title (a lesson) or text (a memory), in the list's own query."""
    lesson = Lesson.objects.filter(pk=OuterRef(id_field)).values("title")[:1]
    memory = Memory.objects.filter(pk=OuterRef(id_field)).values("content")[:1]
    return Case(When(kind=DuplicateKind.LESSON, then=Subquery(lesson)), default=Subquery(memory),
                output_field=TextField())


def _row_link(mark: DuplicateDismissal, row_id: int, text: str | None):
    if text is None:
        return f"#{row_id} (deleted)"
    model = MARKED_MODELS[mark.kind]._meta
    url = reverse(f"admin:{model.app_label}_{model.model_name}_change", args=[row_id])
    return format_html('<a href="{}">#{} {}</a>', url, row_id, Truncator(text).chars(80))
