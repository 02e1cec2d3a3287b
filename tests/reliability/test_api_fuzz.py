"""Property-based fuzzing of the JSON API against its own OpenAPI document (schemathesis).

Every operation of `/api/v1/openapi.json` gets requests generated from its schema, both valid
ones (positive) and ones that break it (negative), sent with a valid API key through the real
WSGI application to the real PostgreSQL and model. Every answer must be documented for its
operation (status code, content type, body schema) and none may be a 5xx. Path ids are real rows
of the key's team half of the time, so reads, changes and deletes reach the services instead of
stopping at 404.

Committed transactions (`transaction=True`): the WSGI handler opens and closes connections as a
server does, and the embedding tasks queued after each write run for real.
"""

import time
from collections import Counter

import pytest
import schemathesis
from django.core.wsgi import get_wsgi_application
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis.errors import Unsatisfiable
from hypothesis import strategies as st
from schemathesis.checks import (
    content_type_conformance,
    not_a_server_error,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)
from schemathesis.core.failures import FailureGroup
from schemathesis.generation import GenerationMode

from lessons.services.api_keys import api_key_create
from lessons.services.lessons import lesson_create
from lessons.services.memories import memory_create, memory_update

pytestmark = pytest.mark.django_db(transaction=True)

# Examples per operation and mode. Operations with few distinct inputs (GET /health) stop early,
# so the total is asserted rather than assumed.
EXAMPLES = {GenerationMode.POSITIVE: 30, GenerationMode.NEGATIVE: 15}
MIN_REQUESTS = 1_000
CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
]
PATH_IDS = {"lesson_id", "memory_id"}


def _seed(team) -> dict[str, list[int]]:
    lessons = [
        lesson_create(team=team, title=f"Retry uploads with backoff {n}", description="Network calls fail.",
                      tech_stacks=["python"], tags=["retry"])
        for n in range(6)
    ]
    lessons.append(lesson_create(team=team, title="A proposal", status="proposed"))
    memories = [memory_create(team=team, content=f"Ana ran the marathon {n}", people=["Ana"]) for n in range(4)]
    memory_update(memory=memories[0], content="Ana ran the Berlin marathon")
    return {"lesson_id": [lesson.pk for lesson in lessons], "memory_id": [memory.pk for memory in memories]}


def _with_real_ids(case, ids: dict[str, list[int]], choice: int):
    """Half of the cases that name a row get a real one of the team's (chosen by Hypothesis)."""
    for name in PATH_IDS & set(case.path_parameters or {}):
        if choice % 2 == 0 and ids[name]:
            case.path_parameters[name] = ids[name][choice // 2 % len(ids[name])]
    return case


def test_every_operation_answers_generated_requests_as_documented(team):
    ids = _seed(team)
    _, raw_key = api_key_create(team=team, name="fuzzer")
    schema = schemathesis.openapi.from_wsgi("/api/v1/openapi.json", get_wsgi_application())
    # Deletes last, so the other operations still find the seeded rows.
    operations = sorted((result.ok() for result in schema.get_all_operations()), key=lambda op: op.method == "delete")
    statuses: Counter = Counter()
    per_operation: Counter = Counter()
    failures: list[str] = []
    started = time.monotonic()

    for operation in operations:
        for mode, examples in EXAMPLES.items():
            strategy = st.tuples(operation.as_strategy(generation_mode=mode), st.integers(0, 1_000))

            @given(strategy)
            @settings(
                max_examples=examples,
                deadline=None,
                database=None,
                derandomize=True,  # the same requests every run: a failure here is reproducible
                phases=[Phase.explicit, Phase.generate],
                suppress_health_check=list(HealthCheck),
            )
            def send(generated):
                case = _with_real_ids(generated[0], ids, generated[1])
                case.headers = {**(case.headers or {}), "Authorization": f"Bearer {raw_key}"}
                response = case.call()
                statuses[response.status_code] += 1
                per_operation[operation.label] += 1
                try:
                    case.validate_response(response, checks=CHECKS)
                except FailureGroup as error:
                    if len(failures) < 20:
                        failures.append(f"{operation.label} [{mode.value}]: {error}")

            try:
                send()
            except Unsatisfiable:
                # Nothing to break in an operation without parameters or body (GET /health).
                assert mode is GenerationMode.NEGATIVE and not operation.body and not operation.query, operation.label

    elapsed = time.monotonic() - started
    total = sum(statuses.values())
    print(
        f"\nfuzzer: {total} requests over {len(per_operation)} operations in {elapsed:.1f} s; "
        f"statuses {dict(sorted(statuses.items()))}"
    )
    assert not failures, "\n\n".join(failures)
    assert not [status for status in statuses if status >= 500]
    assert total >= MIN_REQUESTS
    # Every operation of the document (35 at the time of writing) was sent requests.
    assert len(per_operation) == len(operations) >= 26, sorted(per_operation)
    assert statuses[200] + statuses[201] + statuses[204] > total // 4  # the fuzzer got past validation too
