from django.contrib import admin, messages
from django.contrib.admin.actions import delete_selected as django_delete_selected
from django.http import HttpResponseRedirect
from django.urls import path, reverse
from django.utils.html import format_html_join
from django.utils.safestring import mark_safe
from django.utils.text import Truncator, capfirst

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
from lessons.admin.duplicates import memory_duplicates_view
from lessons.admin.history import restore_version_view
from lessons.admin.embeddings import EmbeddingAdminMixin, EmbeddingStatusFilter
from lessons.admin.usage import USAGE_FIELDS, USAGE_LIST_FIELDS
from lessons.admin.search import CuratedTeamFilter, EngineSearchChangeList, EngineSearchMixin, memory_search_filters
from lessons.models import Memory
from lessons.selectors.curation import memory_merged_into
from lessons.services import memories as memory_services


LIST_CONTENT_CHARS = 300


class MemoryChangeList(EngineSearchChangeList):
    def default_rows(self, queryset):
        # the version filter's default too: current memories ("120 results (147 total)" led back to 120)
        return super().default_rows(queryset).filter(current_version__isnull=True)


class MemoryCurrentFilter(admin.SimpleListFilter):
    """Current memories by default, earlier versions, or both. The default lives here, not in
    get_queryset: there it hid the earlier versions from the filter's own counts ("Earlier versions
    (0)" beside four of them) and made the stock "All" show only current memories."""

    title = "version"
    parameter_name = "version_state"

    def lookups(self, request, model_admin):
        return (("current", "Current memories"), ("earlier", "Earlier versions"), ("all", "Both"))

    def queryset(self, request, queryset):
        if self.value() == "all":
            return queryset
        if self.value() == "earlier":
            return queryset.filter(current_version__isnull=False)
        return queryset.filter(current_version__isnull=True)  # "current", and the default

    def choices(self, changelist):
        # No stock "All" entry: with no choice made the list shows current memories, so that one is
        # marked chosen; "Both" is the whole table.
        for choice in super().choices(changelist):
            if choice["query_string"] == changelist.get_query_string(remove=[self.parameter_name]):
                continue
            if self.value() not in ("earlier", "all") and "version_state=current" in choice["query_string"]:
                choice["selected"] = True  # also for a value it does not know, which lists current ones
            yield choice


@admin.register(Memory)
class MemoryAdmin(
    MergedAwayMixin, TeamChosenOnceMixin, TeamLabelsMixin, ReadableInputsMixin, WideChangeListMixin, EngineSearchMixin,
    EmbeddingAdminMixin, CheckedSelectionModelAdmin,
):
    list_display = (
        "content_preview", "team_label", "importance", "categories", "people_names", "version", *USAGE_LIST_FIELDS,
        "embedding_status",
        "occurred_at",
    )
    list_filter = (MemoryCurrentFilter, CuratedTeamFilter, "importance", EmbeddingStatusFilter)
    search_fields = ("content", "details", "external_id", "people", "categories", "emotions")
    list_select_related = ("team",)
    line_separated_fields = ("people",)
    list_per_page = 50  # a page renders in well under 300 ms; 100 rows took twice that
    readonly_fields = (
        "people_names",
        "version", "created_at", "updated_at", "embedding_status", "embedding_model", "embedded_at", "content_hash",
        *USAGE_FIELDS,
    )
    actions = ("delete_selected", "reembed_selected")
    fieldsets = (
        (None, {"fields": ("team", "external_id", "content", "details")}),
        ("About", {"fields": ("categories", "importance", "people", "emotions", "occurred_at")}),
        ("Usage (reported by agents)", {"fields": USAGE_FIELDS}),
        ("Embedding", {"fields": ("embedding_status", "embedding_model", "embedded_at", "content_hash")}),
        ("History", {"fields": ("version", "created_at", "updated_at")}),
    )

    search_kind = "memories"

    def get_changelist(self, request, **kwargs):
        return MemoryChangeList

    def get_actions(self, request):
        actions = super().get_actions(request)
        if request.GET.get("version_state") == "earlier":  # they are deleted with their memory only
            actions.pop("delete_selected", None)
        return actions

    # The list's first column: a 3,400-character memory made one row 1,200 px tall. The change
    # form shows the whole text.
    @admin.display(description="content", ordering="content")
    def content_preview(self, obj):
        return Truncator(obj.content).chars(LIST_CONTENT_CHARS)

    # One name a line, as the form takes them: joined with commas, "Smith, John" and "Doe, Jane"
    # read as four people.
    @admin.display(description="people")
    def people_names(self, obj):
        # the title: a name longer than the list's column ends in "…" there (console.css)
        return format_html_join(
            "", '<div class="person-name" title="{}">{}</div>', ((name, name) for name in obj.people)
        ) or "-"

    def get_fieldsets(self, request, obj=None):
        fieldsets = super().get_fieldsets(request, obj)
        if obj is None or self.has_change_permission(request, obj):
            return fieldsets
        # read-only (an earlier version, a view-only curator): the names one a line, not comma-joined
        return [
            (title, {**options, "fields": tuple("people_names" if f == "people" else f for f in options["fields"])})
            for title, options in fieldsets
        ]

    def engine_search_filters(self, request):
        return memory_search_filters(request)

    def has_change_permission(self, request, obj=None):
        if obj is not None and not obj.is_current:
            return False  # earlier versions are history: read-only
        return super().has_change_permission(request, obj)

    # An earlier version is deleted with its memory, never alone: that left a gap in the history
    # ("Version 1 ... Version 3", diffed against version 1). Its page has no delete button, and a
    # delete that names one (its URL, the bulk action) is turned back with a message saying why.
    def render_change_form(self, request, context, add=False, change=False, form_url="", obj=None):
        if obj is not None and not obj.is_current:
            context["show_delete"] = False
        return super().render_change_form(request, context, add, change, form_url, obj)

    def delete_view(self, request, object_id, extra_context=None):
        memory = self.get_object(request, object_id)
        if memory is not None and not memory.is_current:
            self.message_user(request, _earlier_versions_kept([memory]), messages.ERROR)
            return HttpResponseRedirect(reverse("admin:lessons_memory_change", args=[memory.pk]))
        return super().delete_view(request, object_id, extra_context)

    def get_deleted_objects(self, objs, request):
        """The confirmation names a memory's earlier versions as such: they were "Memory: ..." rows
        and counted in "Memories: 4", which read as four memories going for one with three
        versions. Only current memories get here (a version's delete is turned back above), so
        every other memory listed is an earlier version of one of them."""
        to_delete, model_count, perms_needed, protected = super().get_deleted_objects(objs, request)
        plural = Memory._meta.verbose_name_plural
        versions = model_count.get(plural, 0) - len(objs)
        if versions > 0:
            model_count[plural] = len(objs)
            model_count["earlier versions"] = versions
            to_delete = _versions_named(to_delete, noun=f"{capfirst(Memory._meta.verbose_name)}: ")
        return to_delete, model_count, perms_needed, protected

    @admin.action(description=django_delete_selected.short_description, permissions=["delete"])
    def delete_selected(self, request, queryset):
        if selection_too_large(self, request, queryset):
            return None
        earlier = list(queryset.filter(current_version__isnull=False).order_by("pk"))
        if earlier:
            self.message_user(request, _earlier_versions_kept(earlier), messages.ERROR)
            return None
        return django_delete_selected(self, request, queryset)

    def save_model(self, request, obj, form, change):
        fields = {name: form.cleaned_data[name] for name in memory_services.EDITABLE_FIELDS if name in form.cleaned_data}
        if change:
            saved = memory_services.memory_update(memory=obj, **changed_values(form))
        else:
            saved = memory_services.memory_create(team=form.cleaned_data["team"], **fields)
            obj.__dict__.update(saved.__dict__)  # the admin goes on with the saved row
        notice = term_normalisation_notice(form=form, saved=saved, field_names=("categories", "emotions"))
        if notice:
            self.message_user(request, notice, messages.INFO)

    def merged_into(self, *, row_id):
        record = memory_merged_into(memory_id=row_id)
        return (record.memory, record.merged_at) if record else None

    def delete_model(self, request, obj):
        memory_services.memory_delete(memory=obj)

    def delete_queryset(self, request, queryset):
        memory_services.memory_delete_many(memories=queryset)

    def get_urls(self):
        # The curation pages (lessons/admin/duplicates.py, history.py), before the "<id>/" patterns.
        view = self.admin_site.admin_view
        return [
            path("duplicates/", view(lambda request: memory_duplicates_view(self, request)), name="lessons_memory_duplicates"),
            path(
                "<int:memory_id>/versions/<int:version_id>/restore/",
                view(lambda request, **ids: restore_version_view(self, request, **ids)),
                name="lessons_memory_restore_version",
            ),
            *super().get_urls(),
        ]


def _earlier_versions_kept(versions: list[Memory]) -> str:
    named = ", ".join(f"version {version.version} of memory #{version.current_version_id}" for version in versions)
    memories = ", ".join(dict.fromkeys(f"#{version.current_version_id}" for version in versions))
    if len(versions) == 1:
        return (f"Nothing was deleted: {named} is part of its memory's history, kept as long as the memory is. "
                f"To remove it, delete the memory ({memories}) with its versions.")
    return (f"Nothing was deleted: {named} are part of their memories' history, kept as long as the memories "
            f"are. To remove them, delete the memories ({memories}) with their versions.")


def _versions_named(items: list, *, noun: str, nested: bool = False) -> list:
    """Django's nested list of what a delete takes, a memory's own rows (one level down) that are
    memories renamed "Earlier version: ..."."""
    named = []
    for item in items:
        if isinstance(item, list):
            named.append(_versions_named(item, noun=noun, nested=True))
        elif nested and isinstance(item, str) and item.startswith(noun):
            named.append(mark_safe(f"Earlier version: {item[len(noun):]}"))  # noqa: S308 - Django's own safe text
        else:
            named.append(item)
    return named
