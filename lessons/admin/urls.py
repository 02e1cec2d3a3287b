"""The admin site's URLs, with the curation console's own pages in front (same `admin` namespace,
same staff-only `admin_view` guard as every admin page)."""

from django.contrib import admin
from django.urls import path, re_path

from lessons.admin.denied import app_index
from lessons.admin.embeddings import embedding_job_view
from lessons.admin.playground import search_playground


def admin_urls():
    # Django's own pattern for an app's page (AdminSite.get_urls): the apps with a model in the admin
    app_labels = "|".join(sorted({model._meta.app_label for model in admin.site._registry}))
    console = [
        path("lessons/search/", admin.site.admin_view(search_playground), name="lessons_search_playground"),
        path("lessons/reembed/<str:token>/", admin.site.admin_view(embedding_job_view), name="lessons_embedding_job"),
        re_path(rf"^(?P<app_label>{app_labels})/$", admin.site.admin_view(app_index), name="app_list"),
    ]
    return [*console, *admin.site.get_urls()], "admin", admin.site.name
