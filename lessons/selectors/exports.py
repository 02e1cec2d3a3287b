"""A team's lessons and memories as the JSON objects `import_lessons` and `import_memories` read
(lessons.services.imports), one per row.

The contract: export -> import into an empty team -> export gives the same bytes. So every value
is written as the import reads it back: the fields the import takes, in a fixed key order (the
order of the dicts built here), dates in UTC as ISO 8601 with their offset, each row's `uid` (who
it is: an import finds the row by it, and a row it creates takes it), rows in id order (an import
creates them in file order, so the ids of the new team keep it).

Rows stream from the database CHUNK_SIZE at a time (`.iterator`); a memory's earlier versions
come with its chunk, one query a chunk rather than one a memory. Callers that want one consistent
picture read inside one transaction (the export commands: REPEATABLE READ).
"""

import uuid
from collections.abc import Iterable, Iterator
from datetime import datetime, timezone

from django.db.models import Prefetch

from lessons.models import Lesson, Memory, Team
from lessons.services.lessons import EDITABLE_FIELDS as LESSON_FIELDS
from lessons.services.memories import EDITABLE_FIELDS as MEMORY_FIELDS

CHUNK_SIZE = 500
LESSON_DATES = ("created_at", "updated_at")


def lesson_export_rows(*, team: Team, statuses: Iterable[str] | None = None,
                       chunk_size: int = CHUNK_SIZE) -> Iterator[dict]:
    """The team's lessons (only those in `statuses`, when given), oldest id first."""
    lessons = Lesson.objects.filter(team=team).order_by("id")
    if statuses:
        lessons = lessons.filter(status__in=list(statuses))
    for values in lessons.values(*LESSON_FIELDS, *LESSON_DATES, "uid").iterator(chunk_size=chunk_size):
        yield _lesson_dict(values)


def memory_export_rows(*, team: Team, chunk_size: int = CHUNK_SIZE) -> Iterator[dict]:
    """The team's current memories, oldest id first, each with its earlier versions in `history`."""
    earlier = Prefetch(
        "previous_versions",
        queryset=Memory.objects.order_by("version").only("current_version", "content", "details", "created_at",
                                                         "updated_at"),
        to_attr="earlier_versions",
    )
    memories = (
        Memory.objects.filter(team=team, current_version__isnull=True)
        .order_by("id")
        .only(*MEMORY_FIELDS, "created_at", "updated_at", "uid")  # never the vectors
        .prefetch_related(earlier)
    )
    for memory in memories.iterator(chunk_size=chunk_size):  # with a chunk size, prefetched per chunk
        yield _memory_dict(memory)


def _lesson_dict(values: dict) -> dict:
    return {name: _json_value(values[name]) for name in (*LESSON_FIELDS, *LESSON_DATES, "uid")}


def _memory_dict(memory: Memory) -> dict:
    versions = memory.earlier_versions  # oldest first
    row = {name: _json_value(getattr(memory, name)) for name in MEMORY_FIELDS}
    # listing.memory_versions' rule: the current text was written when the last earlier one was
    # replaced, else when the memory was created (a later change of people or importance does not count).
    row["created_at"] = _json_value(memory.created_at)
    row["written_at"] = _json_value(versions[-1].updated_at if versions else memory.created_at)
    row["updated_at"] = _json_value(memory.updated_at)
    row["uid"] = _json_value(memory.uid)
    # A version's replaced_at is the next text's written_at: the import derives it, so it is not written.
    row["history"] = [
        {"content": version.content, "details": version.details, "written_at": _json_value(version.created_at)}
        for version in versions
    ]
    return row


def _json_value(value):
    if isinstance(value, datetime):
        return value.astimezone(timezone.utc).isoformat()
    if isinstance(value, uuid.UUID):
        return str(value)
    return value
