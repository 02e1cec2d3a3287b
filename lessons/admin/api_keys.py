from django.contrib import admin, messages

from lessons.models import ApiKey
from lessons.services.api_keys import api_key_create, api_key_revoke


@admin.register(ApiKey)
class ApiKeyAdmin(admin.ModelAdmin):
    """Keys are created here (the key is shown once, in the message after saving) and revoked with
    an action; they are never edited, since only their hash is kept."""

    list_display = ("name", "team", "prefix", "created_at", "last_used_at", "revoked_at")
    list_filter = ("team", ("revoked_at", admin.EmptyFieldListFilter))
    search_fields = ("name", "prefix", "team__slug")
    list_select_related = ("team",)
    readonly_fields = ("prefix", "created_at", "last_used_at", "revoked_at")
    actions = ("revoke_selected",)

    def get_fields(self, request, obj=None):
        if obj is None:
            return ("team", "name")
        return ("team", "name", "prefix", "created_at", "last_used_at", "revoked_at")

    def has_change_permission(self, request, obj=None):
        return obj is None  # a key is never edited: revoke it and create another

    def save_model(self, request, obj, form, change):
        created, raw_key = api_key_create(team=form.cleaned_data["team"], name=form.cleaned_data["name"])
        obj.__dict__.update(created.__dict__)  # the admin goes on with the saved row
        messages.warning(
            request,
            f"The API key for {created.team.slug} is {raw_key} — copy it now: it is stored hashed "
            "and cannot be shown again.",
        )

    @admin.action(description="Revoke selected keys")
    def revoke_selected(self, request, queryset):
        revoked = 0
        for api_key in queryset.filter(revoked_at__isnull=True):
            api_key_revoke(api_key=api_key)
            revoked += 1
        self.message_user(request, f"{revoked} key(s) revoked.", messages.SUCCESS)
