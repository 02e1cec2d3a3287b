from django.contrib import admin, messages
from django.urls import path

from lessons.admin.common import changed_values
from lessons.admin.duplicates import lesson_duplicates_view
from lessons.admin.proposals import proposals_view
from lessons.admin.embeddings import EmbeddingAdminMixin, EmbeddingStatusFilter
from lessons.models import Lesson
from lessons.services import lessons as lesson_services


@admin.register(Lesson)
class LessonAdmin(EmbeddingAdminMixin, admin.ModelAdmin):
    list_display = ("title", "team", "category", "status", "confidence", "frequency", "embedding_status", "updated_at")
    list_filter = ("status", "category", "team", EmbeddingStatusFilter)
    search_fields = ("title", "description", "recommendation", "external_id", "tags", "tech_stacks")
    list_select_related = ("team",)
    readonly_fields = ("created_at", "updated_at", "embedding_status", "embedding_model", "embedded_at", "content_hash")
    actions = ("accept_selected", "reject_selected", "reembed_selected")
    fieldsets = (
        (None, {"fields": ("team", "external_id", "title", "category", "status")}),
        ("Lesson", {"fields": ("description", "context", "recommendation")}),
        ("Signals", {"fields": ("confidence", "frequency", "project_types", "tech_stacks", "tags")}),
        ("Embedding", {"fields": ("embedding_status", "embedding_model", "embedded_at", "content_hash")}),
        ("Timestamps", {"fields": ("created_at", "updated_at")}),
    )

    def save_model(self, request, obj, form, change):
        fields = {name: form.cleaned_data[name] for name in lesson_services.EDITABLE_FIELDS if name in form.cleaned_data}
        if change:
            # The form has already written the new values onto `obj`; compare with the stored row.
            stored = Lesson.objects.get(pk=obj.pk)
            lesson_services.lesson_update(lesson=stored, **changed_values(form))
        else:
            created = lesson_services.lesson_create(team=form.cleaned_data["team"], **fields)
            obj.__dict__.update(created.__dict__)  # the admin goes on with the saved row

    def delete_model(self, request, obj):
        lesson_services.lesson_delete(lesson=obj)

    @admin.action(description="Accept selected proposals (confirm)")
    def accept_selected(self, request, queryset):
        self._set_status(request, queryset, lesson_services.lesson_accept, "accepted")

    @admin.action(description="Reject selected lessons")
    def reject_selected(self, request, queryset):
        self._set_status(request, queryset, lesson_services.lesson_reject, "rejected")

    def _set_status(self, request, queryset, service, verb):
        done = 0
        for lesson in queryset:
            service(lesson=lesson)
            done += 1
        self.message_user(request, f"{done} lesson(s) {verb}.", messages.SUCCESS)

    def get_urls(self):
        # The curation pages (lessons/admin/proposals.py, duplicates.py), before the "<id>/" patterns.
        view = self.admin_site.admin_view
        return [
            path("proposals/", view(lambda request: proposals_view(self, request)), name="lessons_lesson_proposals"),
            path("duplicates/", view(lambda request: lesson_duplicates_view(self, request)), name="lessons_lesson_duplicates"),
            *super().get_urls(),
        ]
