"""Pairs marked "not a duplicate", listed so a curator can take a mark back (delete it): the pair
then shows among the duplicates again. Marks are made on the duplicates pages, not here.

Whoever may make a mark may take it back: a curator with change permission on lessons sees and
deletes the lesson marks, on memories the memory marks, without a permission of this model's own."""

from django.contrib import admin

from lessons.models import DuplicateDismissal, DuplicateKind, Lesson, Memory

MARKED_MODELS = {DuplicateKind.LESSON: Lesson, DuplicateKind.MEMORY: Memory}


def _curated_kinds(request) -> list[str]:
    return [
        kind for kind, model in MARKED_MODELS.items()
        if request.user.has_perm(f"{model._meta.app_label}.change_{model._meta.model_name}")
    ]


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

    def has_view_permission(self, request, obj=None):
        return super().has_view_permission(request, obj) or self._curates(request, obj)

    def has_delete_permission(self, request, obj=None):
        return super().has_delete_permission(request, obj) or self._curates(request, obj)

    def get_queryset(self, request):
        queryset = super().get_queryset(request)
        if super().has_view_permission(request) or super().has_delete_permission(request):
            return queryset
        return queryset.filter(kind__in=_curated_kinds(request))

    @staticmethod
    def _curates(request, obj) -> bool:
        kinds = _curated_kinds(request)
        return bool(kinds) if obj is None else obj.kind in kinds
