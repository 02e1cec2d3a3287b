from django.contrib import admin, messages
from django.utils import timezone
from django.utils.formats import date_format

from lessons.admin.common import CheckedSelectionModelAdmin, TeamFilter, TeamLabelsMixin, WideChangeListMixin
from lessons.models import ApiKey
from lessons.services.api_keys import api_key_create, api_key_revoke


class KeyStateFilter(admin.SimpleListFilter):
    title = "state"
    parameter_name = "state"

    def lookups(self, request, model_admin):
        return (("active", "Active"), ("revoked", "Revoked"))

    def queryset(self, request, queryset):
        if self.value() in ("active", "revoked"):
            return queryset.filter(revoked_at__isnull=self.value() == "active")
        return queryset


@admin.register(ApiKey)
class ApiKeyAdmin(TeamLabelsMixin, WideChangeListMixin, CheckedSelectionModelAdmin):
    """Keys are created here (the key is shown once, in the message after saving) and revoked with
    an action; they are never edited, since only their hash is kept."""

    # Whether a key still works comes second, so a narrow screen never cuts it off.
    list_display = ("name", "state", "team_label", "prefix", "last_used_at", "created_at")
    list_filter = (KeyStateFilter, ("team", TeamFilter))
    search_fields = ("name", "prefix", "team__slug")
    list_select_related = ("team",)
    readonly_fields = ("prefix", "created_at", "last_used_at", "revoked_at")
    actions = ("revoke_selected",)

    def get_fields(self, request, obj=None):
        if obj is None:
            return ("team", "name")
        return ("team", "name", "prefix", "created_at", "last_used_at", "revoked_at")

    def has_change_permission(self, request, obj=None):
        # A key is never edited (revoke it and create another); "change" on the list is revoking.
        return obj is None and super().has_change_permission(request)

    def changelist_view(self, request, extra_context=None):
        return super().changelist_view(request, extra_context={"title": "API keys", **(extra_context or {})})

    @admin.display(description="state", ordering="revoked_at")
    def state(self, obj):
        if obj.revoked_at is None:
            return "active"
        return f"revoked {date_format(timezone.localtime(obj.revoked_at), 'SHORT_DATETIME_FORMAT')}"

    def save_model(self, request, obj, form, change):
        created, raw_key = api_key_create(team=form.cleaned_data["team"], name=form.cleaned_data["name"])
        obj.__dict__.update(created.__dict__)  # the admin goes on with the saved row
        messages.warning(
            request,
            f"The API key for {created.team.slug} is {raw_key} — copy it now: it is stored hashed "
            "and cannot be shown again.",
        )

    @admin.action(description="Revoke selected keys", permissions=["change"])
    def revoke_selected(self, request, queryset):
        revoked = 0
        for api_key in queryset.filter(revoked_at__isnull=True):
            api_key_revoke(api_key=api_key)
            revoked += 1
        already = queryset.count() - revoked
        if not revoked:
            self.message_user(request, "Every selected key was revoked already: nothing changed.", messages.WARNING)
            return
        note = f" {already} selected key(s) were revoked already." if already else ""
        self.message_user(request, f"{revoked} key(s) revoked.{note}", messages.SUCCESS)
