from django.contrib import admin, messages
from django.contrib.auth.models import Permission
from django.template.response import TemplateResponse
from django.utils import timezone
from django.utils.formats import date_format

from lessons.admin.common import CheckedSelectionModelAdmin, TeamFilter, TeamLabelsMixin, WideChangeListMixin
from lessons.models import ApiKey
from lessons.services.api_keys import api_key_create, api_key_permissions_missing, api_key_revoke


def _permission_labels(dotted: list[str]) -> list[tuple[str, str]]:
    """(`lessons.view_lesson`, "Can view lesson"): the code, and the name the Users page lists it by."""
    names = {
        f"{app_label}.{codename}": name
        for app_label, codename, name in Permission.objects.filter(
            content_type__app_label__in={permission.split(".")[0] for permission in dotted},
            codename__in=[permission.split(".")[1] for permission in dotted],
        ).values_list("content_type__app_label", "codename", "name")
    }
    return [(permission, names.get(permission, permission)) for permission in dotted]


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
    an action; they are never edited, since only their hash is kept.

    A key reads and writes its whole team through the API, so only a curator who holds every
    permission it carries may create one (`api_key_permissions_missing`): "add API key" alone gave a
    curator refused every lesson route a key that deleted lessons. The others get a page saying
    which permissions they lack (403).

    The team menu offers the curated teams (no `eval-*`), and a key's page shows its team as the lesson
    pages do (`TeamLabelsMixin`): linked only for a curator who may open the team."""

    # Whether a key still works comes second, so a narrow screen never cuts it off.
    list_display = ("name", "state", "team_label", "prefix", "last_used_at", "created_at")
    list_filter = (KeyStateFilter, ("team", TeamFilter))
    search_fields = ("name", "prefix", "team__slug")
    list_select_related = ("team",)
    readonly_fields = ("prefix", "created_at", "last_used_at", "revoked_at")
    actions = ("revoke_selected",)

    def add_view(self, request, form_url="", extra_context=None):
        missing = api_key_permissions_missing(user=request.user) if self.has_add_permission(request) else []
        if missing:  # GET and POST alike: nothing is saved, the page says why
            context = {
                **self.admin_site.each_context(request),
                "title": "You may not create API keys",
                "subtitle": None,
                "opts": self.opts,
                "missing": _permission_labels(missing),
            }
            return TemplateResponse(request, "admin/lessons/apikey/add_refused.html", context, status=403)
        return super().add_view(request, form_url, extra_context)

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
