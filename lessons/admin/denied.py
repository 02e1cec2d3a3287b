"""The admin's "permission denied" page: the admin's header, a sentence saying what happened and a
way back, instead of Django's bare "403 Forbidden" (a curator meets it by following a link to a
row of a kind they may not open, e.g. from the playground). Other paths keep Django's own page.

Staff whose account has no permission at all in the console get a page that says so, and whom to
ask; an app's page of models they may see none of (/admin/lessons/) is that denial too, where
Django answered 404 as if the page did not exist."""

from django.contrib import admin
from django.core.exceptions import PermissionDenied
from django.http import Http404
from django.template.response import TemplateResponse
from django.urls import reverse
from django.views import defaults


def permission_denied(request, exception):
    if not request.path.startswith(reverse("admin:index")) or not getattr(request, "user", None):
        return defaults.permission_denied(request, exception)
    context = admin.site.each_context(request)
    no_permissions = not context["available_apps"]  # not one model of the console to view
    context = {
        **context,
        "title": "No permissions in this console" if no_permissions else "Permission denied",
        "subtitle": None,
        "no_permissions": no_permissions,
    }
    return TemplateResponse(request, "admin/lessons/permission_denied.html", context, status=403).render()


def app_index(request, app_label: str):
    """Django's page of one app's models, denied (403, above) rather than "not found" when the
    curator may see none of them. Its URL names only apps with models in the admin, so a 404 from
    Django's view means exactly that."""
    try:
        return admin.site.app_index(request, app_label)
    except Http404:
        raise PermissionDenied(f"no model of {app_label} is visible to this account") from None
