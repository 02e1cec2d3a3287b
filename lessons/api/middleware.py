"""Every answer under the API's prefix is JSON, also the ones no endpoint writes: Django's 404
for a path the API does not have (an HTML page) and ninja's 405 for a method an endpoint does not
take (plain text). An agent parses one error shape, `{"detail", "errors"}`. And the 415 for a body
not sent as JSON (lessons.api.parser): ninja answers any error of its parser as a 400.

HEAD is answered wherever GET is (HTTP: the same answer without its body; ninja routes GET only,
so `curl -I /api/v1/health` was a 405)."""


from django.http import JsonResponse

from lessons.api.errors import error_body, field_error

API_PREFIX = "/api/"


class JsonApiErrorsMiddleware:
    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        method = request.method
        head = method == "HEAD" and request.path.startswith(API_PREFIX)
        request.head_only = head  # a HEAD must change nothing: searches are not recorded (operations.source_of)
        if head:
            request.method = "GET"
        response = self._answer(request, method)
        if head:
            request.method = "HEAD"
            if not response.streaming:
                length = len(response.content)
                response.content = b""
                response["Content-Length"] = str(length)
        return response

    def _answer(self, request, method: str):
        response = self.get_response(request)
        if refused := getattr(request, "unsupported_media_type", None):
            return self._unsupported_media_type(refused, method)
        if not request.path.startswith(API_PREFIX) or response.status_code not in (404, 405):
            return response
        if response.get("Content-Type", "").startswith("application/json"):
            return response  # an endpoint's own answer (an id that does not exist)
        if response.status_code == 404:
            detail = f"no endpoint at {request.path}; the API's paths are in /api/v1/openapi.json"
            return JsonResponse(error_body(detail), status=404)
        allowed = response.get("Allow", "")
        if "GET" in allowed.split(", "):
            allowed += ", HEAD"
        detail = f"{method} is not allowed on {request.path}" + (f"; use {allowed}" if allowed else "")
        answer = JsonResponse(error_body(detail), status=405)
        if allowed:
            answer["Allow"] = allowed
        return answer

    @staticmethod
    def _unsupported_media_type(refused, method: str):
        answer = JsonResponse(field_error(refused.field, refused.message), status=415)
        # RFC 5789: a PATCH's 415 names what it takes in Accept-Patch (W3C LDP: Accept-Post for a POST)
        if header := {"PATCH": "Accept-Patch", "POST": "Accept-Post"}.get(method):
            answer[header] = "application/json"
        return answer
