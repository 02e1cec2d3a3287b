"""Django's own error answers, for the requests Django turns away before a view runs: under
`/api/` they are JSON like every other API answer (`{"detail": ..., "errors": []}`), elsewhere
Django's pages. A wrong Host header (400) and a POST without a CSRF token to the API's docs (403)
used to answer the API's clients with HTML."""

import sys

from django.db import InterfaceError, OperationalError
from django.http import HttpResponse, JsonResponse
from django.views import csrf, defaults

from lessons.api.errors import error_body
from lessons.api.middleware import API_PREFIX


def _is_api(request) -> bool:
    return request.path.startswith(API_PREFIX)


def bad_request(request, exception):
    if _is_api(request):
        return JsonResponse(error_body("bad request: the Host header names no host this server answers to "
                                       "(DJANGO_ALLOWED_HOSTS), or the request is malformed"), status=400)
    return defaults.bad_request(request, exception)


def csrf_failure(request, reason=""):
    if _is_api(request):
        detail = ("this endpoint takes no POST from a browser session without a CSRF token; "
                  "the API's operations take 'Authorization: Bearer <key>'")
        return JsonResponse(error_body(detail), status=403)
    return csrf.csrf_failure(request, reason)


DATABASE_DOWN_PAGE = """<!doctype html><html lang="en"><head><meta charset="utf-8"><title>Database unavailable</title>
</head><body><h1>The database is not answering</h1><p>The memory store cannot reach its database right now.
Nothing you sent was saved. Try again in a moment; the server's log says why.</p></body></html>"""


def server_error(request):
    """An outage is a 503, as the API answers it: the admin answered a bare "Server Error (500)" on
    every page, a sign-in included, while the database was down. Other faults keep Django's 500.
    A page of its own, not a template: rendering one must not need the database either."""
    error = sys.exc_info()[1]
    if isinstance(error, (OperationalError, InterfaceError)):
        response = HttpResponse(DATABASE_DOWN_PAGE, status=503)
        response["Retry-After"] = "5"
        return response
    return defaults.server_error(request)
