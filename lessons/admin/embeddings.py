"""The embedding status in the admin lists (computed in SQL, see lessons.selectors.embeddings), a
filter on it, and the "Re-embed selected" action, which goes through the backfill service."""

from django.contrib import admin, messages

from lessons.embedding import EmbeddingUnavailable
from lessons.models import EmbeddingStatus
from lessons.selectors.embeddings import with_embedding_status
from lessons.services.embeddings import embedding_backfill, embedding_kind


class EmbeddingStatusFilter(admin.SimpleListFilter):
    title = "embedding"
    parameter_name = "embedding_status"

    def lookups(self, request, model_admin):
        return EmbeddingStatus.choices

    def queryset(self, request, queryset):
        if self.value() in EmbeddingStatus.values:
            return queryset.filter(embedding_status=self.value())
        return queryset


class EmbeddingAdminMixin:
    """For the admin classes of rows that carry an embedding. Put it before ModelAdmin."""

    def get_queryset(self, request):
        return with_embedding_status(super().get_queryset(request))

    @admin.display(description="embedding", ordering="embedding_status")
    def embedding_status(self, obj):
        status = getattr(obj, "embedding_status", None)  # absent on the add form's unsaved row
        return EmbeddingStatus(status).label if status else "-"


    @admin.action(description="Re-embed selected")
    def reembed_selected(self, request, queryset):
        ids = list(queryset.values_list("pk", flat=True))
        kind = embedding_kind(queryset.model())
        try:
            report = embedding_backfill(kind=kind, ids=ids, include_fresh=True)
        except EmbeddingUnavailable as error:
            self.message_user(request, f"Re-embedded 0, failed {len(ids)}: {error}", messages.ERROR)
            return
        text = f"Re-embedded {report.embedded}, failed {report.failed}."
        if report.failure_reasons:
            text += " " + "; ".join(report.failure_reasons)
        if report.changed:
            text += f" {report.changed} changed while embedding and were left for their own update."
        self.message_user(request, text, messages.WARNING if report.failed or report.changed else messages.SUCCESS)
