"""The admin's "permission denied" page: the admin's header, a sentence saying what happened and a
way back, instead of Django's bare "403 Forbidden" (a curator meets it by following a link to a
row of a kind they may not open, e.g. from the playground). Other paths keep Django's own page."""

from django.contrib import admin
from django.template.response import TemplateResponse
from django.urls import reverse
from django.views import defaults


def permission_denied(request, exception):
    if not request.path.startswith(reverse("admin:index")) or not getattr(request, "user", None):
        return defaults.permission_denied(request, exception)
    context = {
        **admin.site.each_context(request),
        "title": "Permission denied",
        "subtitle": None,
    }
    return TemplateResponse(request, "admin/lessons/permission_denied.html", context, status=403).render()
