"""The admin site's URLs, with the curation console's own pages in front (same `admin` namespace,
same staff-only `admin_view` guard as every admin page)."""

from django.contrib import admin
from django.urls import path

from lessons.admin.embeddings import embedding_job_view
from lessons.admin.playground import search_playground


def admin_urls():
    console = [
        path("lessons/search/", admin.site.admin_view(search_playground), name="lessons_search_playground"),
        path("lessons/reembed/<str:token>/", admin.site.admin_view(embedding_job_view), name="lessons_embedding_job"),
    ]
    return [*console, *admin.site.get_urls()], "admin", admin.site.name
