from django.contrib import admin
from django.contrib.staticfiles.views import serve as serve_static
from django.urls import path, re_path
from django.views.generic import RedirectView

from memory_site.api import api

urlpatterns = [
    path("", RedirectView.as_view(url="/admin/", permanent=False)),
    path("admin/", admin.site.urls),
    path("api/v1/", api.urls),
    # The API docs (django-ninja's bundled Swagger UI) and the admin load their CSS and JavaScript
    # from the apps' own static files, never a CDN: many deployments have no internet. Served here
    # so they work with DEBUG off and no web server in front; a proxy may still serve STATIC_ROOT.
    re_path(r"^static/(?P<path>.+)$", serve_static, {"insecure": True}),
]
