from django.contrib import admin
from django.urls import path
from django.views.generic import RedirectView

from lessons.admin.urls import admin_urls
from memory_site.api import api

# The admin modules load here, not at django.setup(): a management command that serves no
# request (`manage.py search`) never imports them (memory_site/apps.py).
admin.autodiscover()

handler400 = "memory_site.error_pages.bad_request"
handler500 = "memory_site.error_pages.server_error"
handler403 = "lessons.admin.denied.permission_denied"

urlpatterns = [
    path("", RedirectView.as_view(url="/admin/", permanent=False)),
    path("admin/", admin_urls()),
    path("api/v1/", api.urls),
]
