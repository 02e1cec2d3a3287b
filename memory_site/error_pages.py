"""Django's own error answers, for the requests Django turns away before a view runs: under
`/api/` they are JSON like every other API answer (`{"detail": ..., "errors": []}`), elsewhere
Django's pages. A wrong Host header (400) and a POST without a CSRF token to the API's docs (403)
used to answer the API's clients with HTML."""

from django.http import JsonResponse
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
