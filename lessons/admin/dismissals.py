"""Pairs marked "not a duplicate", listed so a curator can take a mark back (delete it): the pair
then shows among the duplicates again. Marks are made on the duplicates pages, not here."""

from django.contrib import admin

from lessons.models import DuplicateDismissal


@admin.register(DuplicateDismissal)
class DuplicateDismissalAdmin(admin.ModelAdmin):
    list_display = ("kind", "low_id", "high_id", "team", "dismissed_at")
    list_filter = ("kind", "team")
    list_select_related = ("team",)
    readonly_fields = ("team", "kind", "low_id", "high_id", "dismissed_at")

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False
