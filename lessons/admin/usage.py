"""Learning from use in the admin: the usage columns of lessons and memories (sortable, as model
fields), and the recorded searches with the verdicts agents gave, read-only."""

from django.contrib import admin

from lessons.admin.common import CheckedSelectionModelAdmin, TeamFilter, TeamLabelsMixin
from lessons.models import SearchFeedback, SearchRecord

USAGE_FIELDS = ("returned_count", "used_count", "not_helpful_count", "last_returned_at", "last_used_at")
USAGE_LIST_FIELDS = ("returned_count", "used_count", "last_used_at")


class SearchFeedbackInline(admin.TabularInline):
    model = SearchFeedback
    fields = ("result_id", "verdict", "created_at")
    readonly_fields = fields
    extra = 0
    can_delete = False

    def has_add_permission(self, request, obj=None):
        return False


@admin.register(SearchRecord)
class SearchRecordAdmin(TeamLabelsMixin, CheckedSelectionModelAdmin):
    """What agents searched and which results they used: history, never edited here (the
    retention command deletes it)."""

    list_display = ("created_at", "team_label", "kind", "operation", "query", "mode", "source", "result_count")
    list_filter = (("team", TeamFilter), "kind", "operation", "source")
    search_fields = ("query",)
    list_select_related = ("team",)
    date_hierarchy = "created_at"
    fields = ("id", "team", "kind", "operation", "query", "mode", "source", "result_ids", "created_at")
    readonly_fields = fields
    inlines = (SearchFeedbackInline,)

    @admin.display(description="results")
    def result_count(self, obj):
        return len(obj.result_ids)

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False
