"""One JSON shape for a search answer, used by the API and `manage.py search --json` alike."""

from datetime import date, datetime

from django.core.serializers.json import DjangoJSONEncoder

from lessons.search.types import SearchHit, SearchResponse

# The API's renderer writes every other timestamp (`LessonOut`, `MemoryOut`) with this encoder:
# milliseconds and `Z`. A search hit's fields use it too, so one client parser reads both.
_TIMESTAMPS = DjangoJSONEncoder()


def _plain(value):
    if isinstance(value, (datetime, date)):
        return _TIMESTAMPS.default(value)
    if isinstance(value, (list, tuple)):
        return [_plain(item) for item in value]
    if isinstance(value, dict):
        return {key: _plain(item) for key, item in value.items()}
    return value


def search_hit_as_dict(hit: SearchHit) -> dict:
    return {
        "id": hit.id,
        "external_id": hit.external_id,
        "kind": hit.kind,
        "score": hit.score,
        "relevance": hit.relevance,
        "found_by": list(hit.found_by),
        "fields": _plain({key: value for key, value in hit.fields.items() if key != "embedding"}),
        # always there, as in the API's answer (an empty list, a null explanation)
        "collapsed_ids": list(hit.collapsed_ids),
        "explanation": None if hit.explanation is None else _plain(hit.explanation),
    }


def search_response_as_dict(response: SearchResponse) -> dict:
    counted = {} if response.total is None else {"total": response.total}
    return {
        "mode": response.mode,
        "degraded": response.degraded,
        "degraded_reason": response.degraded_reason,
        "fallback": response.fallback,
        "timings_ms": dict(response.timings_ms),
        "candidates": dict(response.candidates),
        "context_keywords": list(response.context_keywords),
        **counted,
        "results": [search_hit_as_dict(hit) for hit in response.results],
    }
