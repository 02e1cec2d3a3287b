"""The redirect of plain HTTP to HTTPS keeps the method: a 308 instead of Django's 301 for a
request that is not a GET or HEAD. The 301 let clients repeat `POST /api/v1/search` as a GET
(curl -L, most HTTP libraries), which then answered 405 instead of pointing at the mistake.

It sits in front of Django's SecurityMiddleware (which stays in MIDDLEWARE by name, as its deploy
checks look for it) and changes only that middleware's own redirect."""

PERMANENT_REDIRECT_KEEPING_THE_METHOD = 308


class HttpsRedirectKeepsTheMethodMiddleware:
    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        response = self.get_response(request)
        redirected_to_https = (
            response.status_code == 301
            and not request.is_secure()
            and response.get("Location", "").startswith("https://")
        )
        if redirected_to_https and request.method not in ("GET", "HEAD"):
            response.status_code = PERMANENT_REDIRECT_KEEPING_THE_METHOD
        return response
