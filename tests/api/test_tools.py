import json

import pytest
from django.conf import settings
from django.core.exceptions import ValidationError as DjangoValidationError

from lessons.search import SearchRequestError

from lessons.api.tools import AGENT_TOOLS, TOOLS_BY_NAME, _for_kind, _inline, function_parameters
from memory_site.api import api as ninja_api

SEED_TOOLS = {
    "semantic_search",
    "get_all_friends",
    "get_panic_attacks",
    "get_interests",
    "get_events",
    "search_by_person",
    "search_by_emotion",
    "search_across_versions",
}


@pytest.fixture(scope="module")
def openapi():
    return ninja_api.get_openapi_schema()


def _operation(openapi, tool) -> dict:
    method, path = tool.endpoint.split(" ", 1)
    return openapi["paths"]["/api/v1" + path][method.lower()]


def _endpoint_parameters(openapi, tool) -> dict:
    """What the endpoint accepts, as the OpenAPI document says, in function-calling form: its body or
    query string, and the ids in its path (a memory tool's `memory_id`)."""
    operation = _operation(openapi, tool)
    components = openapi["components"]["schemas"]
    in_path = [p for p in operation.get("parameters", []) if p["in"] == "path"]
    if "requestBody" in operation:
        body = operation["requestBody"]["content"]["application/json"]["schema"]
        taken = function_parameters(body, definitions=components, fixed=(*tool.fixed, *tool.hidden))
    else:
        taken = {
            "type": "object",
            "properties": {
                parameter["name"]: _inline(parameter["schema"], components)
                for parameter in operation.get("parameters", [])
                if parameter["in"] == "query" and parameter["name"] not in tool.fixed
            },
            "additionalProperties": False,  # a tool takes its endpoint's parameters and nothing else
        }
        taken["required"] = [p["name"] for p in operation.get("parameters", [])
                             if p["in"] == "query" and p.get("required") and p["name"] not in tool.fixed]
    taken["properties"].update({p["name"]: _inline(p["schema"], components) for p in in_path})
    required = sorted({*taken.pop("required", []), *(p["name"] for p in in_path)})
    # a tool fixed to one kind describes a field as it reads for that kind (the shape is the same)
    return _for_kind({**taken, **({"required": required} if required else {})}, tool.fixed.get("kind"))


def _takes_if_match(operation) -> bool:
    return any(p["in"] == "header" and p["name"] == "If-Match" for p in operation.get("parameters", []))


def test_tools_cover_the_seeds_and_the_lesson_tools():
    names = {tool.name for tool in AGENT_TOOLS}
    assert SEED_TOOLS | {"search_lessons", "store_lesson", "propose_lesson", "store_memory", "report_usage"} <= names
    assert {"get_memory", "update_memory", "delete_memory"} <= names
    assert len(names) == len(AGENT_TOOLS)


@pytest.mark.parametrize("tool", AGENT_TOOLS, ids=lambda tool: tool.name)
def test_each_tool_takes_exactly_what_its_endpoint_takes(openapi, tool):
    parameters = tool.parameters()
    # If-Match is a header over HTTP; a tool takes it as the `updated_at` the agent read
    assert ("expected_updated_at" in parameters["properties"]) == _takes_if_match(_operation(openapi, tool))
    parameters["properties"].pop("expected_updated_at", None)
    if "required" in parameters:
        parameters["required"] = sorted(parameters["required"])
    assert parameters == _endpoint_parameters(openapi, tool)


def test_the_memory_tools_name_the_memory_and_take_what_was_read():
    assert TOOLS_BY_NAME["get_memory"].parameters()["required"] == ["memory_id"]
    for name in ("update_memory", "delete_memory"):
        parameters = TOOLS_BY_NAME[name].parameters()
        assert parameters["required"] == ["memory_id"]
        assert {"type": "string", "format": "date-time"} in parameters["properties"]["expected_updated_at"]["anyOf"]
    assert {"content", "people", "importance", "occurred_at"} <= set(TOOLS_BY_NAME["update_memory"].parameters()[
        "properties"])


@pytest.mark.parametrize("tool", AGENT_TOOLS, ids=lambda tool: tool.name)
def test_tool_schemas_are_self_contained(tool):
    text = json.dumps(tool.as_function())
    assert "$ref" not in text and "$defs" not in text
    assert tool.parameters()["type"] == "object"


def _undescribed(schema: dict, path: str = "") -> list[str]:
    found = []
    for name, prop in schema.get("properties", {}).items():
        where = f"{path}.{name}".lstrip(".")
        found += [] if "description" in prop else [where]
        for inner in (prop, prop.get("items", {}), *prop.get("anyOf", [])):
            found += _undescribed(inner, where)
    return found


@pytest.mark.parametrize("tool", AGENT_TOOLS, ids=lambda tool: tool.name)
def test_every_argument_says_what_it_is(tool):
    # 23 arguments (confidence, tags, importance, people, fusion, ...) came to the model with no word
    assert _undescribed(tool.parameters()) == []


def test_a_phase_is_offered_as_its_values():
    for tool, schema in (("relevant_lessons", lambda p: p["properties"]["phase"]),
                         ("search_lessons", lambda p: p["properties"]["filters"]["properties"]["phase"])):
        phase = schema(TOOLS_BY_NAME[tool].parameters())
        assert phase["enum"] == [*settings.SEARCH_PHASE_CATEGORIES, None]


def test_fixed_values_are_not_parameters():
    assert "kind" not in TOOLS_BY_NAME["search_lessons"].parameters()["properties"]
    assert "emotion" not in TOOLS_BY_NAME["get_panic_attacks"].parameters()["properties"]
    assert TOOLS_BY_NAME["search_by_emotion"].parameters()["required"] == ["emotion"]
    assert TOOLS_BY_NAME["search_lessons"].parameters()["required"] == ["query"]


def test_a_search_tool_fixed_to_one_kind_does_not_offer_the_other_kinds_options():
    memories = TOOLS_BY_NAME["semantic_search"].parameters()["properties"]
    assert "tech_stack" not in memories and "project_type" not in memories
    assert {"people", "emotions", "min_importance", "since"} <= set(memories["filters"]["properties"])
    assert not {"tags", "tech_stacks", "project_types", "phase", "statuses"} & set(memories["filters"]["properties"])
    assert memories["filters"]["additionalProperties"] is False
    lessons = TOOLS_BY_NAME["search_lessons"].parameters()["properties"]
    assert {"tech_stack", "project_type"} <= set(lessons)
    assert {"tags", "tech_stacks", "phase", "statuses", "categories"} <= set(lessons["filters"]["properties"])
    assert not {"people", "emotions", "min_importance", "include_versions"} & set(lessons["filters"]["properties"])


def _descriptions(node, path=""):
    if isinstance(node, dict):
        if isinstance(node.get("description"), str):
            yield path, node["description"]
        for key, value in node.items():
            yield from _descriptions(value, f"{path}.{key}")
    elif isinstance(node, list):
        for value in node:
            yield from _descriptions(value, path)


@pytest.mark.parametrize("tool, other", [("search_lessons", "memor"), ("semantic_search", "lesson")])
def test_a_search_tool_fixed_to_one_kind_describes_its_fields_for_that_kind(openapi, tool, other):
    # search_lessons said of its category filter "Lessons: category is one of; memories: shares one"
    parameters = TOOLS_BY_NAME[tool].parameters()
    assert "x-per-kind" not in json.dumps(parameters)
    said = dict(_descriptions(parameters))
    assert [(path, text) for path, text in said.items() if other in text.lower() or " only" in text.lower()] == []
    categories = said[".properties.filters.properties.categories"]
    assert categories == ("The lesson's category is one of these." if tool == "search_lessons"
                          else "The memory has one of these categories.")
    # the endpoint, which takes both kinds, still says both
    filters = openapi["components"]["schemas"]["SearchFiltersIn"]["properties"]
    assert filters["categories"]["description"] == "Lessons: category is one of; memories: shares one."


@pytest.mark.django_db
def test_an_option_the_tool_does_not_offer_is_refused_by_name(team):
    with pytest.raises(DjangoValidationError) as refused:
        TOOLS_BY_NAME["semantic_search"].call(team=team, arguments={"query": "trip", "tech_stack": ["nextjs"]})
    assert "not an argument of semantic_search" in refused.value.message_dict["tech_stack"][0]
    with pytest.raises(SearchRequestError) as refused:
        TOOLS_BY_NAME["search_lessons"].call(team=team, arguments={"query": "x", "filters": {"people": ["Sam"]}})
    assert refused.value.field == "filters.people"


@pytest.mark.django_db
def test_get_tools_lists_them_as_function_calling_schemas(anonymous):
    response = anonymous.get("/tools")
    assert response.status_code == 200
    assert response.json() == [tool.as_function() for tool in AGENT_TOOLS]
    first = response.json()[0]
    assert first["type"] == "function"
    assert set(first["function"]) == {"name", "description", "parameters"}


@pytest.mark.django_db
def test_get_tools_refuses_a_parameter_it_does_not_take(anonymous):
    response = anonymous.get("/tools?kind=memories")
    assert response.status_code == 422
    assert "not a parameter of /api/v1/tools; it takes no query parameters" in response.content.decode()


def test_report_usage_takes_a_search_id_and_two_lists():
    parameters = TOOLS_BY_NAME["report_usage"].parameters()
    assert parameters["required"] == ["search_id"]
    assert set(parameters["properties"]) == {"search_id", "used", "not_helpful"}
    assert TOOLS_BY_NAME["report_usage"].endpoint == "POST /feedback"
