from django.urls import path
from django.views.generic import RedirectView

from lessons.admin.urls import admin_urls
from memory_site.api import api

urlpatterns = [
    path("", RedirectView.as_view(url="/admin/", permanent=False)),
    path("admin/", admin_urls()),
    path("api/v1/", api.urls),
]
