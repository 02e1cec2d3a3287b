"""The agent tools: each is an endpoint's input schema, operation and output schema under a
function-calling name. `GET /tools` lists them as JSON schemas; `python manage.py mcp` serves them
over MCP. Parameters are generated from the endpoint's own schema (minus the values a tool fixes,
such as `kind` for `search_lessons`), so a tool cannot drift from its endpoint. A tool for one
memory takes the path's id as the argument `memory_id`, and If-Match as `expected_updated_at`
(the `updated_at` the agent read).
"""

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from django.core.exceptions import ValidationError as DjangoValidationError
from django.core.serializers.json import DjangoJSONEncoder
from ninja import Router, Schema
from pydantic import TypeAdapter

from lessons.api import operations
from lessons.api.query_parameters import takes_query
from lessons.api.schemas import (
    ByEmotionQuery,
    ByPersonQuery,
    EventsQuery,
    FeedbackIn,
    FeedbackOut,
    LessonIn,
    LessonListIn,
    LessonListOut,
    LessonOut,
    LessonProposeIn,
    MemoryDeletedOut,
    MemoryDeleteIn,
    MemoryIdIn,
    MemoryIn,
    MemoryLimitQuery,
    MemoryListIn,
    MemoryListOut,
    MemoryOut,
    MemoryUpdateIn,
    MemoryWithVersionsOut,
    PanicAttacksQuery,
    PatternsQuery,
    PeopleOut,
    PersonSearchOut,
    RelevantLessonsQuery,
    SearchIn,
    SearchOut,
    SearchVersionsIn,
    PER_KIND,
    SessionIn,
    ToolOut,
)
from lessons.models import Team


def _inline(node: Any, definitions: dict) -> Any:
    """Resolve `$ref`s and drop schema titles and null defaults (as ninja's OpenAPI document does):
    function-calling clients want one flat schema."""
    if isinstance(node, list):
        return [_inline(item, definitions) for item in node]
    if not isinstance(node, dict):
        return node
    if "$ref" in node:
        target = definitions[node["$ref"].rsplit("/", 1)[-1]]
        extra = {key: value for key, value in node.items() if key != "$ref"}
        return _inline({**target, **extra}, definitions)
    if len(node.get("allOf", ())) == 1:  # OpenAPI's way of putting a description beside a $ref
        extra = {key: value for key, value in node.items() if key != "allOf"}
        return _inline({**node["allOf"][0], **extra}, definitions)
    clean = {}
    for key, value in node.items():
        if key in ("$defs", "title") or (key == "default" and value is None):
            continue
        if key == "properties":
            clean[key] = {name: _inline(schema, definitions) for name, schema in value.items()}
        elif key in ("default", "examples", "const", "enum"):
            clean[key] = value
        else:
            clean[key] = _inline(value, definitions)
    return clean


def function_parameters(schema: dict, *, definitions: dict | None = None, fixed=()) -> dict:
    """A pydantic / OpenAPI object schema as function-calling parameters, without `fixed` fields."""
    flat = _inline(schema, {**schema.get("$defs", {}), **(definitions or {})})
    return _without(flat, fixed)


_SHAPE = ("type", "properties", "additionalProperties", "required")  # what _without rebuilds of an object


def _without(schema: dict, names) -> dict:
    """An object schema as function-calling parameters without `names`; a dotted name ("filters.tags")
    leaves out a field of a nested object."""
    top = {name for name in names if "." not in name}
    nested: dict[str, list[str]] = {}
    for name in names:
        if "." in name:
            outer, inner = name.split(".", 1)
            nested.setdefault(outer, []).append(inner)
    properties = {
        name: {**_without(value, nested[name]), **{key: value[key] for key in value if key not in _SHAPE}}
        if name in nested else value
        for name, value in schema.get("properties", {}).items()
        if name not in top
    }
    parameters = {"type": "object", "properties": properties, "additionalProperties": False}
    required = [name for name in schema.get("required", []) if name not in top]
    if required:
        parameters["required"] = required
    return parameters



def _for_kind(node: Any, kind: str | None) -> Any:
    """The schema as a tool fixed to `kind` (None: both kinds) shows it: a field described per kind
    (schemas.per_kind) says only what it means for that kind. search_lessons described its category
    filter as "Lessons: category is one of; memories: shares one"."""
    if isinstance(node, list):
        return [_for_kind(item, kind) for item in node]
    if not isinstance(node, dict):
        return node
    shown = {key: _for_kind(value, kind) for key, value in node.items() if key != PER_KIND}
    if kind in node.get(PER_KIND, {}):
        shown["description"] = node[PER_KIND][kind]
    return shown


def other_kinds_options(kind: str) -> tuple[str, ...]:
    """The search options only another kind takes. A tool fixed to one kind does not offer them: a
    memory search's schema listed tags and tech stacks, which the search then refused by name."""
    caller_context = ("tech_stack", "project_type") if kind != "lessons" else ()
    filters = [f"filters.{name}" for other, names in operations.KIND_ONLY_FILTERS.items() if other != kind
               for name in names]
    return (*caller_context, *filters)


@dataclass(frozen=True)
class AgentTool:
    name: str
    description: str
    endpoint: str  # "METHOD /path" of the endpoint it mirrors
    input: type[Schema]
    output: Any
    operation: Callable[..., Any]
    fixed: dict = field(default_factory=dict)
    hidden: tuple[str, ...] = ()  # options the endpoint takes that the tool does not offer (dotted: nested)

    def parameters(self) -> dict:
        parameters = function_parameters(self.input.model_json_schema(), fixed=(*self.fixed, *self.hidden))
        return _for_kind(parameters, self.fixed.get("kind"))

    def output_schema(self) -> dict:
        """What the tool answers, as the endpoint's response schema (MCP's `outputSchema`), flat
        like the parameters: a client can check an answer and read its fields without the docs."""
        schema = TypeAdapter(self.output).json_schema(mode="serialization")
        return _inline(schema, schema.get("$defs", {}))

    def as_function(self) -> dict:
        function = {"name": self.name, "description": self.description, "parameters": self.parameters()}
        return {"type": "function", "function": function}

    def call(self, *, team: Team, arguments: dict | None, source: str = "mcp") -> Any:
        """Validate `arguments` with the endpoint's schema (raises pydantic.ValidationError), run
        the endpoint's operation, and return its answer as JSON-ready data."""
        # A misspelt argument ("limt") must not silently run with the default, nor a fixed one
        # ("kind" of search_lessons) be quietly overridden: both are refused by name.
        takes = [name for name in self.input.model_fields if name not in self.fixed and name not in self.hidden]
        unknown = sorted(set(arguments or {}) - set(takes))
        if unknown:
            message = f"not an argument of {self.name}; it takes {', '.join(takes)}"
            raise DjangoValidationError({name: message for name in unknown})
        payload = self.input.model_validate({**(arguments or {}), **self.fixed})
        # Search-shaped answers are recorded under the caller's name (see operations._recorded).
        extra = {"source": source} if issubclass(self.output, SearchOut) else {}
        result = self.operation(team=team, payload=payload, **extra)
        # Written as the API writes it (DjangoJSONEncoder: timestamps in milliseconds with Z); pydantic's
        # own JSON mode wrote microseconds, so one client parser could not read both surfaces.
        data = TypeAdapter(self.output).dump_python(
            TypeAdapter(self.output).validate_python(result, from_attributes=True)
        )
        return json.loads(json.dumps(data, cls=DjangoJSONEncoder))


AGENT_TOOLS: tuple[AgentTool, ...] = (
    AgentTool(
        name="search_lessons",
        description="Search the team's lessons learned by meaning and words (hybrid search). Use before "
        "designing or debugging something: 'database security', 'frontend state management'.",
        endpoint="POST /search",
        input=SearchIn,
        output=SearchOut,
        operation=operations.search,
        fixed={"kind": "lessons"},
        hidden=other_kinds_options("lessons"),
    ),
    AgentTool(
        name="report_usage",
        description="After a search: report which results you used (and which were not helpful), by the "
        "answer's search_id and the results' ids. The store ranks what agents use a little higher.",
        endpoint="POST /feedback",
        input=FeedbackIn,
        output=FeedbackOut,
        operation=operations.report_usage,
    ),
    AgentTool(
        name="semantic_search",
        description="Search memories by meaning, not just keywords: hybrid by default (meaning, exact words, "
                    "importance and recency); mode semantic for meaning alone, text for words alone.",
        endpoint="POST /search",
        input=SearchIn,
        output=SearchOut,
        operation=operations.search,
        fixed={"kind": "memories"},
        hidden=other_kinds_options("memories"),
    ),
    AgentTool(
        name="relevant_lessons",
        description=("Lessons relevant to a project: its type, tech stack and phase. A phase alone lists that "
                     "phase's confirmed lessons, its categories in turn, each by quality."),
        endpoint="GET /lessons/relevant",
        input=RelevantLessonsQuery,
        output=SearchOut,
        operation=operations.relevant_lessons,
    ),
    AgentTool(
        name="patterns_for_feature",
        description="Implementation patterns and pitfalls for a feature you are about to build.",
        endpoint="GET /lessons/patterns",
        input=PatternsQuery,
        output=SearchOut,
        operation=operations.lesson_patterns,
    ),
    AgentTool(
        name="lessons_for_session",
        description="Lessons worth knowing at the start of a work session, from the project, "
        "working directory and recent activity.",
        endpoint="POST /lessons/session",
        input=SessionIn,
        output=SearchOut,
        operation=operations.session_lessons,
    ),
    AgentTool(
        name="list_lessons",
        description="List lessons as stored, not ranked: filtered by words (`text`), status (`proposed` for what "
        "waits for a curator), category, tech_stack, project_type, tag and external_id; the most recently changed "
        "first. `total` counts every match; `results` holds `limit` of them from `offset`.",
        endpoint="GET /lessons",
        input=LessonListIn,
        output=LessonListOut,
        operation=operations.list_lessons,
    ),
    AgentTool(
        name="store_lesson",
        description="Store a lesson learned (confirmed unless status says otherwise).",
        endpoint="POST /lessons",
        input=LessonIn,
        output=LessonOut,
        operation=operations.store_lesson,
    ),
    AgentTool(
        name="propose_lesson",
        description="Propose a lesson learned; it waits as 'proposed' until a curator accepts it.",
        endpoint="POST /lessons/propose",
        input=LessonProposeIn,
        output=LessonOut,
        operation=operations.propose_lesson,
    ),
    AgentTool(
        name="store_memory",
        description="Store a personal memory (content, categories, importance, people, emotions).",
        endpoint="POST /memories",
        input=MemoryIn,
        output=MemoryOut,
        operation=operations.store_memory,
    ),
    AgentTool(
        name="get_memory",
        description="One memory by id, with its texts (`versions`: the current one first, then each earlier "
        "one with when it was written and replaced). Its `updated_at` is what update_memory and delete_memory "
        "take as `expected_updated_at`.",
        endpoint="GET /memories/{memory_id}",
        input=MemoryIdIn,
        output=MemoryWithVersionsOut,
        operation=operations.get_memory,
    ),
    AgentTool(
        name="update_memory",
        description="Correct a memory: only the fields you send change (a list, such as people, is replaced "
        "as a whole); a new content or details keeps the old text as a version. Send the `updated_at` you read "
        "as `expected_updated_at`: if someone changed the memory since, nothing is written and the error says "
        "so (read it again, then re-apply your change).",
        endpoint="PATCH /memories/{memory_id}",
        input=MemoryUpdateIn,
        output=MemoryOut,
        operation=operations.update_memory,
    ),
    AgentTool(
        name="delete_memory",
        description="Forget a memory, with all its earlier versions (when asked to). With `expected_updated_at`, "
        "a memory changed since you read it is not deleted.",
        endpoint="DELETE /memories/{memory_id}",
        input=MemoryDeleteIn,
        output=MemoryDeletedOut,
        operation=operations.delete_memory,
    ),
    AgentTool(
        name="list_memories",
        description="List memories as stored, not ranked: filtered by words (`text`), category, person, emotion, "
        "min_importance, external_id and when they happened (`since`, `until`), in an `order`: `occurred_at` "
        "for a timeline, `-occurred_at`, `-importance`, or the most recently changed first (the default). "
        "`total` counts every match; `results` holds `limit` of them from `offset`.",
        endpoint="GET /memories",
        input=MemoryListIn,
        output=MemoryListOut,
        operation=operations.list_memories,
    ),
    AgentTool(
        name="get_all_friends",
        description="Everyone named in the memories: one entry per person (names compared "
        "in any case, with or without accents: 'Zoe' and 'Zoë' are one), with a memory about them as "
        "summary (one that says their name and names the fewest others, the most important of those), "
        "their highest importance, how many memories name them "
        "and those memories' ids; most important first, then by name. Counts every memory naming the person, whatever its category.",
        endpoint="GET /memories/friends",
        input=MemoryLimitQuery,
        output=PeopleOut,
        operation=operations.friends,
    ),
    AgentTool(
        name="get_panic_attacks",
        description="Every panic attack memory (emotions or categories hold 'panic' or "
        "'panic-attack', also spelled 'panic attack' or 'panic_attack'), in the order they happened, "
        "with `total`; nothing else is mixed in.",
        endpoint="GET /memories/panic-attacks",
        input=PanicAttacksQuery,
        output=MemoryListOut,
        operation=operations.panic_attacks,
    ),
    AgentTool(
        name="get_interests",
        description="Every interest and hobby memory (category 'interest'), most important first, "
        "then most recent, with `total`.",
        endpoint="GET /memories/interests",
        input=MemoryLimitQuery,
        output=MemoryListOut,
        operation=operations.interests,
    ),
    AgentTool(
        name="get_events",
        description="Event memories (category 'event') of the last `days` days up to now (when "
        "they happened, else when stored; events still to come are not listed), newest first, with `total`.",
        endpoint="GET /memories/events",
        input=EventsQuery,
        output=MemoryListOut,
        operation=operations.events,
    ),
    AgentTool(
        name="search_by_person",
        description="Memories about a specific person, ranked by meaning; spelling- and accent-tolerant "
        "('Jon' finds Jonas when nobody is called Jon, 'Zoe' Zoë). The person's own memories (their name "
        "in `people`) come first. `total` counts every memory naming them. A name no memory has gives no results.",
        endpoint="GET /memories/by-person",
        input=ByPersonQuery,
        output=PersonSearchOut,
        operation=operations.by_person,
    ),
    AgentTool(
        name="search_by_emotion",
        description="Find memories with a specific emotional signal (happy, sad, anxious, excited, ...): those "
        "tagged with it first, then others whose meaning is close enough to be labelled at least medium "
        "(in a small team a memory can come that close by chance); never the most recent memories as filler.",
        endpoint="GET /memories/by-emotion",
        input=ByEmotionQuery,
        output=SearchOut,
        operation=operations.by_emotion,
    ),
    AgentTool(
        name="search_across_versions",
        description="Search all memory versions, including old versions that have since been updated.",
        endpoint="POST /memories/search-versions",
        input=SearchVersionsIn,
        output=SearchOut,
        operation=operations.search_versions,
    ),
)

TOOLS_BY_NAME: dict[str, AgentTool] = {tool.name: tool for tool in AGENT_TOOLS}

router = Router(tags=["tools"])


@router.get("/tools", response=list[ToolOut], auth=None)
@takes_query(body=False)  # `/tools?kind=memories` answered every tool, as if filtered
def list_tools(request):
    """The agent tools as function-calling JSON schemas (the same tools `manage.py mcp` serves)."""
    return [tool.as_function() for tool in AGENT_TOOLS]
