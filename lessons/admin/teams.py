from django import forms
from django.contrib import admin
from django.db import transaction
from django.db.models import Count, Q
from django.urls import reverse
from django.utils.html import format_html

from lessons.admin.common import CheckedChangeList, CheckedSelectionModelAdmin
from lessons.models import Team
from lessons.selectors.admin_search import evaluation_team_q
from lessons.selectors.teams import CONTENT_NAMES, team_contents
from lessons.services import teams as team_services

# The delete confirmation's summary, in TeamContents' order (what team_delete removes and counts);
# beside "Memories" the page says which versions go with them.
DELETED_LABELS = {**{name: several for name, (_, several) in CONTENT_NAMES.items()},
                  "memory_versions": "earlier memory versions"}


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


class TeamForm(forms.ModelForm):
    """A slug starting with `eval-` is refused for a team added, or renamed, here: the lists hide
    evaluation teams, so one added as "eval-demo" was "added successfully" and then gone from the
    list. Those teams are eval_retrieval's and simulate_usage's, which create them through the
    services; an evaluation team's own page still saves while its slug stays as it is. The rule is
    the team service's (slug_is_reserved), which create_team and --create-team follow too."""

    def clean_slug(self):
        slug = self.cleaned_data["slug"]
        if "slug" in self.changed_data and team_services.slug_is_reserved(slug):  # added or renamed
            raise forms.ValidationError(team_services.RESERVED_SLUG_RULE)  # the field shows the slug
        return slug


@admin.register(Team)
class TeamAdmin(CheckedSelectionModelAdmin):
    form = TeamForm
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

    def get_deleted_objects(self, objs, request):
        """Counts, not rows: Django's collector listed every lesson, memory and memory version (one
        memory with three versions read "Memories: 3"; eval-scifact's page was 875 KB and took 2 s).
        The counts are team_delete's own; the list names only the teams."""
        teams = list(objs)
        totals = dict.fromkeys(DELETED_LABELS, 0)
        for team in teams:
            for name, count in team_contents(team=team).as_dict().items():
                totals[name] += count
        model_count = {"teams": len(teams)} if len(teams) > 1 else {}
        model_count.update({DELETED_LABELS[name]: count for name, count in totals.items()})
        to_delete = [
            format_html('Team: <a href="{}">{}</a>', reverse("admin:lessons_team_change", args=[team.pk]), team)
            for team in teams
        ]
        return to_delete, model_count, self._delete_permissions_lacking(request, teams), []

    def _delete_permissions_lacking(self, request, teams) -> set[str]:
        """The kinds of row, in this admin, that the teams hold and the user may not delete: what
        Django's collector refuses on, asked per kind rather than per row."""
        site, lacking = self.admin_site, set()
        for relation in Team._meta.related_objects:
            model = relation.related_model
            if not site.is_registered(model) or site.get_model_admin(model).has_delete_permission(request):
                continue
            if model._default_manager.filter(**{f"{relation.field.name}__in": teams}).exists():
                lacking.add(model._meta.verbose_name)
        return lacking

    def delete_model(self, request, obj):
        team_services.team_delete(team=obj)

    @transaction.atomic
    def delete_queryset(self, request, queryset):
        # the list's delete action: each team as delete_team deletes it, all or none
        for team in list(queryset):
            team_services.team_delete(team=team)
