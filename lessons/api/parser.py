"""The API's reader of request bodies: ninja's, but an object naming a key twice is refused (400,
`lessons.strict_json`) instead of keeping the last value."""

from django.http import HttpRequest
from ninja.parser import Parser

from lessons import strict_json


class StrictJSONParser(Parser):
    def parse_body(self, request: HttpRequest):
        return strict_json.loads(request.body)
