"""What an agent can do, as plain functions `(*, team, payload) -> result`.

The HTTP handlers and the agent tools (`GET /tools`, the MCP server) both call these, with the
same input schema, so an endpoint and its tool cannot behave differently. Each one calls a single
selector or service (a memory's tools read the memory first, as its handlers do).

Every search-shaped answer is recorded (`lessons.services.usage.search_record`) and carries its
`search_id`, which `report_usage` (`POST /feedback`) takes back with the ids the agent used.
`source` says who asked: "api" for the HTTP handlers, "mcp" for the MCP server's tools.
"""

from contextlib import contextmanager
from datetime import datetime

from django.core.exceptions import ValidationError
from django.core.serializers.json import DjangoJSONEncoder

from lessons.api import errors
from lessons.api.schemas import (
    ByEmotionQuery,
    ByPersonQuery,
    EventsQuery,
    FeedbackIn,
    LessonIn,
    LessonListIn,
    LessonProposeIn,
    MemoryDeleteIn,
    MemoryIdIn,
    MemoryIn,
    MemoryLimitQuery,
    MemoryListIn,
    MemoryUpdateIn,
    PanicAttacksQuery,
    PatternsQuery,
    RelevantLessonsQuery,
    SearchIn,
    SearchVersionsIn,
    SessionIn,
)
from lessons.models import Lesson, Memory, Team
from lessons.search import SearchFilters, SearchRequest, SearchRequestError
from lessons.search import search as run_search
from lessons.search.serialise import search_response_as_dict
from lessons.selectors.lessons import lessons_for_session, lessons_patterns_for_feature, lessons_relevant
from lessons.selectors.listing import lesson_list, memory_get, memory_list, memory_versions
from lessons.selectors.memories import (
    memories_by_emotion,
    memories_by_person,
    memories_friends,
    memories_interests,
    memories_panic_attacks,
    memories_recent_events,
    memories_search_versions,
)
from lessons.services import lessons as lesson_services
from lessons.services import memories as memory_services
from lessons.services import usage as usage_services
from lessons.services.common import ChangedSinceRead


def source_of(request) -> str | None:
    """Where a read-only search request comes from, as recorded: None for a `HEAD`, which the API
    answers by running the `GET` view (lessons.api.middleware). It must change nothing, and it
    recorded a search and counted its hits as returned (which lowers their usage signal) for an
    answer nobody saw."""
    return None if getattr(request, "head_only", False) else "api"


def _recorded(*, team: Team, response, kind: str, operation: str, query: str, source: str | None) -> dict:
    """The answer as JSON-ready data, with the `search_id` under which it was recorded (None:
    not recorded, for `source` None)."""
    answer = search_response_as_dict(response)
    if source is None:
        answer["search_id"] = None
        return answer
    search_id = usage_services.search_record(
        team=team, kind=kind, operation=operation, query=query, mode=response.mode,
        result_ids=response.returned_ids(), source=source,
    )
    answer["search_id"] = None if search_id is None else str(search_id)
    return answer


def _arguments(payload) -> str:
    """A shortcut's arguments as recorded in place of a query: `{"feature": "Authentication"}`."""
    return payload.model_dump_json(exclude_defaults=True)


# --- search --------------------------------------------------------------------------------


# Filters that only one kind has: given with a value for the other kind they would be ignored
# (a memory search "filtered" by tags answered every memory), so they are refused by name.
KIND_ONLY_FILTERS = {
    "lessons": ("statuses", "phase", "tech_stacks", "project_types", "tags"),
    "memories": ("min_importance", "people", "emotions", "include_versions"),
}


def _refuse_filters_of_the_other_kind(payload: SearchIn) -> None:
    filters = payload.filters
    for kind, names in KIND_ONLY_FILTERS.items():
        if kind == payload.kind:
            continue
        for name in names:
            if name in filters.model_fields_set and getattr(filters, name) != type(filters).model_fields[name].default:
                raise SearchRequestError(f"filters.{name}", f"filters {kind} only; this search is of {payload.kind}")


def search_request_from(*, team: Team, payload: SearchIn):
    _refuse_filters_of_the_other_kind(payload)
    filters = payload.filters
    return SearchRequest(
        team=team,
        query=payload.query,
        kind=payload.kind,
        mode=payload.mode,
        limit=payload.limit,
        context=payload.context,
        filters=SearchFilters(
            statuses=tuple(filters.statuses),
            categories=tuple(filters.categories),
            phase=filters.phase,
            tech_stacks=tuple(filters.tech_stacks),
            project_types=tuple(filters.project_types),
            tags=tuple(filters.tags),
            min_importance=filters.min_importance,
            people=tuple(filters.people),
            emotions=tuple(filters.emotions),
            since=filters.since,
            until=filters.until,
            include_versions=filters.include_versions,
        ),
        tech_stack=tuple(payload.tech_stack),
        project_type=payload.project_type,
        fusion=payload.fusion,
        weights=payload.weights.model_dump() if payload.weights is not None else None,
        explain=payload.explain,
    )


def search(*, team: Team, payload: SearchIn, source: str = "api") -> dict:
    response = run_search(request=search_request_from(team=team, payload=payload))
    return _recorded(team=team, response=response, kind=payload.kind, operation="search", query=payload.query,
                     source=source)


def report_usage(*, team: Team, payload: FeedbackIn) -> dict:
    return usage_services.feedback_record(
        team=team, search_id=payload.search_id, used=payload.used, not_helpful=payload.not_helpful
    ).as_dict()


# --- lessons -------------------------------------------------------------------------------


def store_lesson(*, team: Team, payload: LessonIn) -> Lesson:
    return lesson_services.lesson_create(team=team, **payload.model_dump())


def propose_lesson(*, team: Team, payload: LessonProposeIn) -> Lesson:
    return lesson_services.lesson_propose(team=team, **payload.model_dump())


def relevant_lessons(*, team: Team, payload: RelevantLessonsQuery, source: str | None = "api") -> dict:
    return _recorded(
        team=team, kind="lessons", operation="relevant_lessons", query=_arguments(payload), source=source,
        response=lessons_relevant(
            team=team,
            project_type=payload.project_type,
            tech_stack=tuple(payload.tech_stack),
            phase=payload.phase,
            limit=payload.limit,
        )
    )


def lesson_patterns(*, team: Team, payload: PatternsQuery, source: str | None = "api") -> dict:
    return _recorded(
        team=team, kind="lessons", operation="lesson_patterns", query=_arguments(payload), source=source,
        response=lessons_patterns_for_feature(
            team=team,
            feature=payload.feature,
            tech_stack=tuple(payload.tech_stack),
            project_type=payload.project_type,
            limit=payload.limit,
        )
    )


def session_lessons(*, team: Team, payload: SessionIn, source: str = "api") -> dict:
    return _recorded(
        team=team, kind="lessons", operation="session_lessons", query=_arguments(payload), source=source,
        response=lessons_for_session(
            team=team,
            project=payload.project,
            cwd=payload.cwd,
            recent_activity=payload.recent_activity,
            limit=payload.limit,
        )
    )


# --- memories ------------------------------------------------------------------------------


def store_memory(*, team: Team, payload: MemoryIn) -> Memory:
    return memory_services.memory_create(team=team, **payload.model_dump())


@contextmanager
def _named_as_the_tools_arguments(expected_updated_at: datetime | None = None):
    """A tool names the memory by the argument `memory_id` (the endpoint: by its path): a 404 names it,
    as report_usage's names `search_id`; a stale write names `expected_updated_at`, the tools' If-Match."""
    try:
        yield
    except Memory.DoesNotExist as missing:
        missing.field = "memory_id"
        raise
    except ChangedSinceRead as changed:
        sent = f"updated_at {DjangoJSONEncoder().default(expected_updated_at)}"
        message = errors.changed_since_read(row=changed.row, sent=sent, again="call get_memory again")
        raise ValidationError({"expected_updated_at": message}) from None


def get_memory(*, team: Team, payload: MemoryIdIn) -> Memory:
    """The memory (GET /memories/{id}) with its texts (GET /memories/{id}/versions) as `versions`."""
    with _named_as_the_tools_arguments():
        memory = memory_get(team=team, memory_id=payload.memory_id)
    memory.versions = memory_versions(memory=memory)
    return memory


def update_memory(*, team: Team, payload: MemoryUpdateIn) -> Memory:
    changes = payload.model_dump(exclude_unset=True, exclude={"memory_id", "expected_updated_at"})
    with _named_as_the_tools_arguments(payload.expected_updated_at):
        memory = memory_get(team=team, memory_id=payload.memory_id)
        return memory_services.memory_update(memory=memory, expected_updated_at=payload.expected_updated_at, **changes)


def delete_memory(*, team: Team, payload: MemoryDeleteIn) -> dict:
    with _named_as_the_tools_arguments(payload.expected_updated_at):
        memory = memory_get(team=team, memory_id=payload.memory_id)
        memory_services.memory_delete(memory=memory, expected_updated_at=payload.expected_updated_at)
    return {"id": payload.memory_id, "deleted": True}


def friends(*, team: Team, payload: MemoryLimitQuery):
    return memories_friends(team=team, limit=payload.limit)


def _page(rows, *, payload) -> dict:
    return {"total": rows.count(), "results": list(rows[payload.offset:payload.offset + payload.limit])}


def list_lessons(*, team: Team, payload: LessonListIn) -> dict:
    return _page(lesson_list(team=team, filters=payload.filters()), payload=payload)


def list_memories(*, team: Team, payload: MemoryListIn) -> dict:
    return _page(memory_list(team=team, filters=payload.filters(), order=payload.order), payload=payload)


def panic_attacks(*, team: Team, payload: PanicAttacksQuery):
    return memories_panic_attacks(team=team, limit=payload.limit)


def interests(*, team: Team, payload: MemoryLimitQuery):
    return memories_interests(team=team, limit=payload.limit)


def events(*, team: Team, payload: EventsQuery):
    return memories_recent_events(team=team, days=payload.days, limit=payload.limit)


def by_person(*, team: Team, payload: ByPersonQuery, source: str | None = "api") -> dict:
    return _recorded(
        team=team, kind="memories", operation="by_person", query=_arguments(payload), source=source,
        response=memories_by_person(team=team, name=payload.name, limit=payload.limit),
    )


def by_emotion(*, team: Team, payload: ByEmotionQuery, source: str | None = "api") -> dict:
    return _recorded(
        team=team, kind="memories", operation="by_emotion", query=_arguments(payload), source=source,
        response=memories_by_emotion(team=team, emotion=payload.emotion, limit=payload.limit),
    )


def search_versions(*, team: Team, payload: SearchVersionsIn, source: str = "api") -> dict:
    return _recorded(
        team=team, kind="memories", operation="search_versions", query=payload.query, source=source,
        response=memories_search_versions(team=team, query=payload.query, limit=payload.limit),
    )
