from django.contrib import admin
from django.urls import path
from django.views.generic import RedirectView

from memory_site.api import api

urlpatterns = [
    path("", RedirectView.as_view(url="/admin/", permanent=False)),
    path("admin/", admin.site.urls),
    path("api/v1/", api.urls),
]
