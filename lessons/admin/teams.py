from django.contrib import admin
from django.db.models import Count, Q

from lessons.admin.common import CheckedChangeList, CheckedSelectionModelAdmin
from lessons.models import Team
from lessons.selectors.admin_search import evaluation_team_q


class EvaluationTeamFilter(admin.SimpleListFilter):
    """Evaluation teams (`eval-*`, benchmark corpora) stay out of the list unless asked for."""

    title = "evaluation teams"
    parameter_name = "evaluation"

    def lookups(self, request, model_admin):
        return (("include", "With evaluation teams"), ("only", "Only evaluation teams"))

    def choices(self, changelist):
        # The stock first entry says "All" and is marked while the list hides evaluation teams.
        for choice in super().choices(changelist):
            if choice["query_string"] == changelist.get_query_string(remove=[self.parameter_name]):
                choice["display"] = "Without evaluation teams"
            yield choice

    def queryset(self, request, queryset):
        if self.value() == "include":
            return queryset
        if self.value() == "only":
            return queryset.filter(evaluation_team_q(prefix=""))
        return queryset.exclude(evaluation_team_q(prefix=""))


class TeamChangeList(CheckedChangeList):
    def default_rows(self, queryset):
        return queryset.exclude(evaluation_team_q(prefix=""))  # EvaluationTeamFilter's default


@admin.register(Team)
class TeamAdmin(CheckedSelectionModelAdmin):
    list_display = ("slug", "name", "lesson_count", "memory_count", "created_at")
    search_fields = ("slug", "name")
    list_filter = (EvaluationTeamFilter,)
    prepopulated_fields = {"slug": ("name",)}

    def get_changelist(self, request, **kwargs):
        return TeamChangeList

    def get_queryset(self, request):
        return (
            super()
            .get_queryset(request)
            .annotate(
                lesson_total=Count("lessons", distinct=True),
                memory_total=Count("memories", filter=Q(memories__current_version__isnull=True), distinct=True),
            )
        )

    @admin.display(description="lessons", ordering="lesson_total")
    def lesson_count(self, team):
        return team.lesson_total

    @admin.display(description="memories", ordering="memory_total")
    def memory_count(self, team):
        return team.memory_total
