"""Importing lessons and memories from JSON Lines, one object a line.

Each line is checked and written in a transaction of its own: a bad line (broken JSON, a missing
title, a confidence of 7) is reported with its number and reason and leaves nothing behind, while
the good lines are imported. Importing the same file again changes nothing: rows are matched on
`external_id`, then on the line's `uid` (what exports write: who the row is, so a row whose text
or external_id changed since the file was written is still found), and, for a line without an
external_id, on its text as the services store it (a lesson's title and description, a memory's
content and details). Rows alike in that text are taken in id order, and a row a line of this run
already imported is not matched again by a later line: the export writes
rows in id order, so line k takes back the k-th of them, and two rows alike in text stay two.
Curators' work stands: a lesson merged into another is not created again, an existing lesson keeps
its status, and a lesson that curators changed since the import last wrote it (`imported_digest`)
is left as they left it.

A line may carry the row's dates (what `export_lessons` / `export_memories` write): they are taken
only when the import creates the row; an existing row keeps its own. A row whose `updated_at` is
later than the line's changed after the file was written: it is left as it is, with a note, so a
restore of an older backup never rolls back later work. A line without `updated_at` is not checked.
"""

import hashlib
import json
import math
import uuid
from collections.abc import Callable, Iterable
from contextvars import ContextVar
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from itertools import pairwise

from django.core.exceptions import ValidationError
from django.db import DataError, IntegrityError, OperationalError, connection, transaction
from django.utils.dateparse import parse_datetime

from lessons import strict_json
from lessons.error_text import first_line, json_type, over_a_database_limit, unreadable_json
from lessons.models import (
    MAX_TEXT_CHARS, Lesson, LessonMerge, LessonStatus, Memory, MemoryMerge, Team, validate_storable_moment,
)
from lessons.services import lessons as lesson_services
from lessons.services.common import normalise_text
from lessons.services import memories as memory_services
from lessons.services.embeddings import embedding_schedule_backfill, embeddings_deferred
from lessons.services.keyword_index import keyword_impacts_refresh_if_drifted
from lessons.services.teams import team_for_slug
from lessons.text import clean_identifier


class LineError(ValueError):
    """A line that cannot be imported; the message says why."""


class SourceUnreadable(Exception):
    """The file itself failed a read (EIO, a /proc file that refuses reads): no line is to blame."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


class InterruptedWhileReading(KeyboardInterrupt):
    """Ctrl-C (or SIGTERM) while the next line was being read: on a pipe whose writer is slow, where
    a stop mostly lands, the line before it was imported whole."""


@dataclass
class ImportReport:
    created: int = 0
    updated: int = 0
    unchanged: int = 0
    merged_away: int = 0  # lines of rows a curator merged into another: not created again
    errors: list[tuple[int, str]] = field(default_factory=list)
    impacts_refreshed: dict[str, int] = field(default_factory=dict)  # kind -> postings rewritten
    team_removed: bool = False  # the team this import created held nothing at the end
    notes: list[tuple[int, str]] = field(default_factory=list)  # lines imported with something left out
    lines_read: int = 0
    interrupted_at: int | None = None  # Ctrl-C while reading this line: the lines before it are imported
    embedding_interrupted: bool = False  # Ctrl-C while embedding: every row is stored, some not yet embedded
    unreadable: str | None = None  # the OS's reason the file failed a read after `lines_read` lines

    @property
    def ok(self) -> bool:
        return not self.errors

    def stop_if_interrupted(self) -> None:
        """For callers that go on to use what was imported (an evaluation, a benchmark): a Ctrl-C
        the import absorbed to report its lines stops them too."""
        if self.interrupted_at is not None:
            raise KeyboardInterrupt

    def summary(self) -> str:
        merged = f", {self.merged_away} merged away by curators" if self.merged_away else ""
        return (
            f"{self.created} created, {self.updated} updated, {self.unchanged} unchanged{merged}, "
            f"{len(self.errors)} failed"
        )


# --- field readers: each returns a clean value or raises LineError naming the field ---------


def _text(data: dict, name: str, *, required: bool = False, default: str = "") -> str:
    value = data.get(name)
    if value is None:
        if required:
            raise LineError(f"{name}: this field is required")
        return default
    if not isinstance(value, str):
        raise LineError(f"{name}: expected a string, got {json_type(value)}")
    if len(value) > MAX_TEXT_CHARS:  # before any cleaning: a 50 MB text took 7 GB on its way to the model check
        raise LineError(f"{name}: at most {MAX_TEXT_CHARS} characters, as over the API (this one has {len(value):,})")
    _storable_text(name, value)
    if required and not value.strip():
        raise LineError(f"{name}: this field is required")
    return value


def _storable_text(name: str, value: str) -> None:
    """PostgreSQL text holds neither NUL nor a lone surrogate (JSON can spell both: \\u0000, \\ud800)."""
    if "\x00" in value:
        raise LineError(f"{name}: text cannot contain NUL characters (code 0)")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise LineError(f"{name}: not valid Unicode text (a lone surrogate such as \\ud800)") from None


def _number(data: dict, name: str, *, default, integer: bool = False):
    value = data.get(name)
    if value is None:
        return default
    if isinstance(value, str):
        # a number written as a string ("3", "0.9"), as the API and the MCP tools take it: a file
        # the API would store was refused line by line
        try:
            value = float(value.strip())
        except ValueError:
            raise LineError(f"{name}: expected a number, got the string {value[:20]!r}") from None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise LineError(f"{name}: expected a number, got {json_type(value)}")
    try:
        finite = math.isfinite(value)  # JSON's NaN, Infinity, or 1e400
    except OverflowError:  # an integer literal past a float's range (1 and 400 zeros): it stopped the import
        raise LineError(f"{name}: expected a finite number, got one too large") from None
    if not finite:
        raise LineError(f"{name}: expected a finite number, got {value}")
    if integer and value != int(value):
        raise LineError(f"{name}: expected a whole number, got {value}")
    return int(value) if integer else float(value)


def _strings(data: dict, name: str) -> list[str]:
    value = data.get(name)
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise LineError(f"{name}: expected a list of strings")
    for item in value:
        _storable_text(name, item)
    return value


def _datetime(data: dict, name: str) -> datetime | None:
    value = data.get(name)
    if value in (None, ""):
        return None
    try:
        parsed = parse_datetime(value) if isinstance(value, str) else None
    except ValueError as error:  # well formed but impossible: month 13, hour 24, offset +25:00
        raise LineError(f"{name}: not a real date-time, {value!r} ({error})") from None
    if parsed is None:
        raise LineError(f"{name}: expected an ISO-8601 date-time, got {value!r}")
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=timezone.utc)


# A clock a little ahead on the machine that wrote the file is not a mistake; a date days ahead is.
FUTURE_SLACK = timedelta(minutes=1)


def _past_datetime(data: dict, name: str, *, now: datetime) -> datetime | None:
    """When a row was written: `_datetime`'s rules, storable in UTC, and not in the future."""
    value = _datetime(data, name)
    if value is None:
        return None
    try:  # dates go in with a queryset update, which runs no model validation
        validate_storable_moment(value)
    except ValidationError as error:
        raise LineError(f"{name}: {' '.join(error.messages)}") from None
    if value > now + FUTURE_SLACK:
        raise LineError(f"{name}: in the future ({_iso(value)}, now is {_iso(now)})")
    return value


def _uid(data: dict) -> uuid.UUID | None:
    """The row's uid, as exports write it (None: the line gives none)."""
    value = data.get("uid")
    if value in (None, ""):
        return None
    if isinstance(value, str):
        try:
            return uuid.UUID(value.strip())
        except ValueError:
            pass
    raise LineError(f"uid: expected a UUID such as '0b8e8f3c-5a1d-4c8e-9f7a-2d6b1e4c9a10', got {value!r}")


def _iso(value: datetime) -> str:
    return value.astimezone(timezone.utc).isoformat()


def _check_keys(data: dict, allowed: set[str]) -> None:
    unknown = sorted(set(data) - allowed)
    if unknown:
        raise LineError(f"unknown field(s): {', '.join(unknown)}")


# --- lessons ---------------------------------------------------------------------------------

LESSON_DATE_KEYS = ("created_at", "updated_at")
LESSON_KEYS = set(lesson_services.EDITABLE_FIELDS) | set(LESSON_DATE_KEYS) | {"uid"}


def _lesson_fields(data: dict) -> dict:
    _check_keys(data, LESSON_KEYS)
    return {
        "external_id": clean_identifier(_text(data, "external_id")),  # as stored: invisible characters go
        "title": _text(data, "title", required=True),
        "description": _text(data, "description"),
        "context": _text(data, "context"),
        "recommendation": _text(data, "recommendation"),
        "category": _text(data, "category", default="workflow"),
        "confidence": _number(data, "confidence", default=0.5),
        "frequency": _number(data, "frequency", default=1, integer=True),
        "project_types": _strings(data, "project_types"),
        "tech_stacks": _strings(data, "tech_stacks"),
        "tags": _strings(data, "tags"),
        "status": _lesson_status(data),
    }


def _lesson_status(data: dict) -> str:
    """Checked before any match: only a create used to check it, so a re-run matched the bad line
    to a row another line had created and wrote the file's values over it."""
    status = _text(data, "status", default=LessonStatus.CONFIRMED)
    if status not in LessonStatus.values:
        raise LineError(f"status: no status {status!r}; use {', '.join(LessonStatus.values)}")
    return status


def _lesson_dates(data: dict) -> dict:
    """The dates a created lesson takes ({} when the line gives none). Either alone stands for
    both: a lesson created at T was last changed at T, and one last changed at T existed by T."""
    now = datetime.now(timezone.utc)
    created, updated = (_past_datetime(data, name, now=now) for name in LESSON_DATE_KEYS)
    if created and updated and updated < created:
        raise LineError(f"updated_at: before created_at ({_iso(updated)} < {_iso(created)})")
    if not (created or updated):
        return {}
    return {"created_at": created or updated, "updated_at": updated or created}


def _import_lesson(*, team: Team, data: dict):
    fields = _lesson_fields(data)
    dates = _lesson_dates(data)  # checked on every line; applied only to a lesson this line creates
    written = _past_datetime(data, "updated_at", now=datetime.now(timezone.utc))  # checked above
    uid = _uid(data)
    text_match = {"title": normalise_text(fields["title"]), "description": normalise_text(fields["description"])}
    lessons = Lesson.objects.filter(team=team)
    _lock_match_keys(kind="lesson", team=team, external_id=fields["external_id"], uid=uid, text_match=text_match)
    existing = _find_existing(lessons, external_id=fields["external_id"], uid=uid, text_match=text_match)
    if existing is None:
        # A curator merged this lesson into another: importing the file again brought it back as a
        # new lesson beside the one that absorbed it.
        merge = _merge_of(LessonMerge.objects.filter(team=team), external_id=fields["external_id"], uid=uid,
                          text_match=text_match)
        if merge:
            return "merged_away", f"merged into lesson #{merge.lesson_id} by a curator; not created again"
        lesson = lesson_services.lesson_create(team=team, **fields)
        _claim(lesson.pk)
        _remember_import(lesson)
        # after the save: auto_now would overwrite the dates (neither they nor the uid are in the digest)
        if changes := {**dates, **_uid_to_take(lessons, uid=uid)}:
            Lesson.objects.filter(pk=lesson.pk).update(**changes)
        return "created"
    _claim(existing.pk)
    # Accepting and rejecting are the curators' decisions: a file that still says "proposed" does
    # not take back an accept (it did, on every re-import), nor revive a rejected lesson.
    status = fields.pop("status")
    notes = []
    if existing.imported_digest and existing.imported_digest != _imported_digest(existing):
        # Curators changed it since this import's last write (an edit, a merge's summed frequency):
        # the file's older values went back over theirs.
        outcome = "unchanged"
        if lesson_services.lesson_changed_fields(lesson=existing, **fields):
            notes.append("changed by curators since it was imported; the file's values were not applied")
    elif _changed_after(existing, written=written):
        # Not written by an import (no digest to tell), or written by a newer file: an older backup
        # restored over it rolled back the later work.
        outcome = "unchanged"
        if lesson_services.lesson_changed_fields(lesson=existing, **fields):
            notes.append(_changed_after_note(existing, written=written))
    else:
        before = existing.updated_at
        lesson_services.lesson_update(lesson=existing, **fields)
        _remember_import(existing)
        outcome = "unchanged" if existing.updated_at == before else "updated"
    if status != existing.status:
        notes.append(f"status left {existing.status} as the curators set it (the file says {status})")
    return (outcome, "; ".join(notes)) if notes else outcome


IMPORTED_FIELDS = tuple(name for name in lesson_services.EDITABLE_FIELDS if name != "status")


def _imported_digest(lesson: Lesson) -> str:
    values = {name: getattr(lesson, name) for name in IMPORTED_FIELDS}
    return hashlib.sha256(json.dumps(values, sort_keys=True, default=str).encode()).hexdigest()


def _remember_import(lesson: Lesson) -> None:
    """What this import wrote, as the row holds it now (not a change: `updated_at` stays)."""
    lesson.imported_digest = _imported_digest(lesson)
    Lesson.objects.filter(pk=lesson.pk).update(imported_digest=lesson.imported_digest)


# --- memories --------------------------------------------------------------------------------

MEMORY_DATE_KEYS = ("created_at", "written_at", "updated_at")
MEMORY_KEYS = set(memory_services.EDITABLE_FIELDS) | {"history", "uid", *MEMORY_DATE_KEYS}
HISTORY_KEYS = {"content", "details", "written_at"}


def _memory_fields(data: dict) -> dict:
    _check_keys(data, MEMORY_KEYS)
    return {
        "external_id": clean_identifier(_text(data, "external_id")),
        "content": _text(data, "content", required=True),
        "details": _text(data, "details"),
        "categories": _strings(data, "categories"),
        "importance": _number(data, "importance", default=5, integer=True),
        "people": _strings(data, "people"),
        "emotions": _strings(data, "emotions"),
        "occurred_at": _datetime(data, "occurred_at"),
    }


def _memory_history(data: dict, *, now: datetime) -> list[dict]:
    history = data.get("history")
    if history is None:  # absent or null: no earlier versions ({}, "" and false are mistakes, said)
        return []
    if not isinstance(history, list):
        raise LineError(f"history: expected a list of earlier versions, got {json_type(history)}")
    versions = []
    # counted from 0, as the API's error fields count a list's items (`people[0]`)
    for position, version in enumerate(history):
        if not isinstance(version, dict):
            raise LineError(f"history[{position}]: expected an object with content and details")
        unknown = sorted(set(version) - HISTORY_KEYS)
        if unknown:
            raise LineError(f"history[{position}]: unknown field(s): {', '.join(unknown)}")
        try:
            versions.append({"content": _text(version, "content", required=True), "details": _text(version, "details"),
                             "written_at": _past_datetime(version, "written_at", now=now)})
        except LineError as error:
            raise LineError(f"history[{position}].{error}") from error
    return versions


def _memory_dates(data: dict, *, history: list[dict], now: datetime) -> dict | None:
    """The dates a created memory takes, None when the line gives none (the replay's own stand):
    `created_at`, `written` (each text's written_at: the history's, oldest first, then the current
    one's) and `updated_at`. The first text is the one the memory was created with, so its date
    and created_at stand for each other; another date left out is the import's time, and
    updated_at defaults to the last text's. Dates go forward along created_at, history, written_at,
    updated_at (equal is fine)."""
    created, written, updated = (_past_datetime(data, name, now=now) for name in MEMORY_DATE_KEYS)
    given = [version["written_at"] for version in history] + [written]
    if not (created or updated or any(given)):
        return None
    names = [f"history[{position}].written_at" for position in range(len(history))] + ["written_at"]
    if not history and created and written and created != written:
        # listing.memory_versions: a memory without earlier versions was written when it was created
        raise LineError(f"written_at: a memory without history was written when it was created, but written_at "
                        f"({_iso(written)}) is not created_at ({_iso(created)}); give one of them, or both the same")
    at_import = "(not given: the time of the import)"
    chain = [("created_at" if created or given[0] else f"created_at {at_import}", created or given[0] or now)]
    created = chain[0][1]
    for position, (name, moment) in enumerate(zip(names, given)):
        if moment is None:
            moment = created if position == 0 else now
            name = f"{name} {'(not given: created_at)' if position == 0 else at_import}"
        chain.append((name, moment))
    chain.append(("updated_at", updated or chain[-1][1]))
    for (earlier_name, earlier), (name, moment) in pairwise(chain):
        if moment < earlier:
            raise LineError(f"{name.split(' ')[0]}: before {earlier_name} ({_iso(moment)} < {_iso(earlier)}); "
                            "dates go forward from created_at through history to written_at and updated_at")
    return {"created_at": created, "written": [moment for _, moment in chain[1:-1]], "updated_at": chain[-1][1]}


def _replayed_texts(texts: list[dict], written: list) -> list[tuple[dict, datetime | None]]:
    """The texts that become versions, each with its date: a text the same as the one before it
    (as the services store text) makes no new version, so the earlier one's date stands."""
    kept, previous = [], None
    for text, moment in zip(texts, written):
        stored = {name: normalise_text(text[name]) for name in memory_services.VERSIONED_FIELDS}
        if stored != previous:
            kept.append((text, moment))
        previous = stored
    return kept


def _versions_replayed(*, history: list[dict], fields: dict) -> list[dict]:
    """The versions a create would have stored for this history, as stored: compared as written, a
    history repeating a text was noted as differing on every re-import of an unchanged file."""
    texts = [{name: text[name] for name in memory_services.VERSIONED_FIELDS} for text in [*history, fields]]
    replayed = _replayed_texts(texts, [None] * len(texts))
    return [{name: normalise_text(text[name]) for name in memory_services.VERSIONED_FIELDS}
            for text, _ in replayed[:-1]]  # the last text kept is the current row, not a version


def _date_replayed_memory(*, memory: Memory, dates: dict, written: list[datetime]) -> None:
    """Each version row as `_archive_version` dates it (created_at when its text was written,
    updated_at when the next replaced it), so listing.memory_versions reads the file's written_at
    back; the current row's updated_at is taken last, after the saves that moved it."""
    versions = Memory.objects.filter(current_version=memory).order_by("version").values_list("pk", flat=True)
    for pk, (written_at, replaced_at) in zip(list(versions), pairwise(written)):
        Memory.objects.filter(pk=pk).update(created_at=written_at, updated_at=replaced_at)
    Memory.objects.filter(pk=memory.pk).update(created_at=dates["created_at"], updated_at=dates["updated_at"])


def _import_memory(*, team: Team, data: dict) -> str:
    now = datetime.now(timezone.utc)
    fields = _memory_fields(data)
    history = _memory_history(data, now=now)
    dates = _memory_dates(data, history=history, now=now)  # checked on every line, applied only on a create
    written = _past_datetime(data, "updated_at", now=now)  # checked above
    uid = _uid(data)
    text_match = {name: normalise_text(fields[name]) for name in memory_services.VERSIONED_FIELDS}
    memories = Memory.objects.filter(team=team, current_version__isnull=True)
    _lock_match_keys(kind="memory", team=team, external_id=fields["external_id"], uid=uid, text_match=text_match)
    existing = _find_existing(memories, external_id=fields["external_id"], uid=uid, text_match=text_match)
    if existing is None:
        merge = _merge_of(MemoryMerge.objects.filter(team=team), external_id=fields["external_id"], uid=uid,
                          text_match=text_match)
        if merge:  # as for lessons: merged into another, it is not created again beside it
            return "merged_away", f"merged into memory #{merge.memory_id} by a curator; not created again"
        # Replay the history: the first text creates the memory, each later one is a new version.
        texts = [{name: version[name] for name in memory_services.VERSIONED_FIELDS} for version in history]
        texts.append({name: fields[name] for name in memory_services.VERSIONED_FIELDS})
        replayed = _replayed_texts(texts, dates["written"] if dates else [None] * len(texts))
        (first, _), *later = replayed
        memory = memory_services.memory_create(team=team, **{**fields, **first})
        for version, _ in later:
            memory = memory_services.memory_update(memory=memory, **version)
        if dates:
            _date_replayed_memory(memory=memory, dates=dates, written=[moment for _, moment in replayed])
        if taken := _uid_to_take(memories, uid=uid):
            Memory.objects.filter(pk=memory.pk).update(**taken)
        _claim(memory.pk)
        return "created"
    _claim(existing.pk)
    notes = []
    if _changed_after(existing, written=written):
        # A memory has no digest: its date tells that someone edited it after the file was written,
        # and an older backup put the old text back as a new version.
        outcome = "unchanged"
        if memory_services.memory_changed_fields(memory=existing, **fields):
            notes.append(_changed_after_note(existing, written=written))
    else:
        before = existing.updated_at
        memory = memory_services.memory_update(memory=existing, **fields)
        outcome = "unchanged" if memory.updated_at == before else "updated"
    stored = list(Memory.objects.filter(current_version=existing).order_by("version").values(
        *memory_services.VERSIONED_FIELDS))
    given = _versions_replayed(history=history, fields=fields)
    if given != stored[: len(given)]:
        # Versions are the memory's own record of its edits: an import does not rewrite them.
        notes.append("history left as stored: the memory exists, and a history is replayed only when "
                     "an import creates the memory")
    return (outcome, "; ".join(notes)) if notes else outcome


# --- shared ----------------------------------------------------------------------------------


def _changed_after(row, *, written: datetime | None) -> bool:
    """Whether the row changed after the line's `updated_at` (a line without one: not checked)."""
    return written is not None and row.updated_at > written


def _changed_after_note(row, *, written: datetime) -> str:
    return (f"changed since this file was written (stored updated_at {_iso(row.updated_at)} > the file's "
            f"{_iso(written)}); the file's values were not applied")


@dataclass
class _Claims:
    """The rows (ids) the lines of the running import created or matched: a later line alike in
    text takes another row. A line's own claims count once the line is in (a failed line's do not)."""
    imported: set[int] = field(default_factory=set)
    this_line: set[int] = field(default_factory=set)

    def __contains__(self, pk: int) -> bool:
        return pk in self.imported or pk in self.this_line


_claims: ContextVar[_Claims | None] = ContextVar("imports_claims", default=None)


def _claim(pk: int) -> None:
    if (claims := _claims.get()) is not None:
        claims.this_line.add(pk)


def _lock_match_keys(*, kind: str, team: Team, external_id: str | None, uid: uuid.UUID | None,
                     text_match: dict) -> None:
    """Hold each key this line is matched on until the line commits. Two imports of one file at
    once both looked a text up before either stored it, and both created the row (no constraint
    stops a second row alike in text): 60 lines, 27 stored twice. Waiting here, the second finds
    the first's row. Keys locked in one order, so two lines sharing some keys cannot deadlock; a
    hash collision only makes two unrelated lines wait for each other."""
    keys = [f"external_id:{external_id}" if external_id else None, f"uid:{uid}" if uid else None,
            None if external_id else "text:" + json.dumps(text_match, sort_keys=True)]
    locks = sorted({_lock_id(f"import:{kind}:{team.pk}:{key}") for key in keys if key})
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_advisory_xact_lock(id) FROM unnest(%s::bigint[]) WITH ORDINALITY AS t(id, n) "
                       "ORDER BY n", [locks])


def _lock_id(key: str) -> int:
    return int.from_bytes(hashlib.blake2b(key.encode(), digest_size=8).digest(), "big", signed=True)


def _find_existing(queryset, *, external_id: str | None, uid: uuid.UUID | None, text_match: dict):
    claims = _claims.get() or _Claims()
    if external_id:  # unique in the team, and a second line with it is refused before the lookup
        if (row := queryset.filter(external_id=external_id).first()) is not None:
            return row
        # its external_id changed or went since the file was written: the uid still names it
        return _by_uid(queryset, uid=uid, claims=claims)
    if (row := _by_uid(queryset, uid=uid, claims=claims)) is not None:
        return row
    # No such row here (a file from another team, or from before rows had uids): by text. Two rows
    # alike in text (one lesson confirmed, one rejected) came back as one mixed row, and a
    # re-import wrote the first line's values to .first() and the second's back over them.
    candidates = queryset.filter(external_id__isnull=True, **text_match).order_by("pk")
    pk = next((pk for pk in candidates.values_list("pk", flat=True) if pk not in claims), None)
    return None if pk is None else queryset.filter(pk=pk).first()


def _by_uid(queryset, *, uid: uuid.UUID | None, claims: _Claims):
    """The row the file was exported from, whatever its text and external_id now: matched on its
    text alone, a row edited since the export was not found, and a restore made a second one."""
    if uid is None:
        return None
    pk = queryset.filter(uid=uid).values_list("pk", flat=True).first()
    return None if pk is None or pk in claims else queryset.filter(pk=pk).first()


def _uid_to_take(queryset, *, uid: uuid.UUID | None) -> dict:
    """The update that gives a row this line created the line's uid ({} when it gives none, or
    another row of the team has it: the created row keeps the fresh one it was given)."""
    if uid is None or queryset.filter(uid=uid).exists():
        return {}
    return {"uid": uid}


def _merge_of(merges, *, external_id: str | None, uid: uuid.UUID | None, text_match: dict):
    """The latest record of a row merged away that a line names: by its external_id, its uid, or,
    for a line without an external_id, its text, as the rows are matched."""
    merges = merges.order_by("-pk")
    if external_id and (merge := merges.filter(merged_fields__external_id=external_id).first()):
        return merge
    if uid is not None and (merge := merges.filter(merged_fields__uid=str(uid)).first()):
        return merge
    if external_id:
        return None
    return merges.filter(merged_fields__external_id=None,
                         **{f"merged_fields__{name}": value for name, value in text_match.items()}).first()


def _describe(error: Exception) -> str:
    if isinstance(error, ValidationError) and hasattr(error, "message_dict"):
        return "; ".join(
            f"{name}: {' '.join(messages)}" if name != "__all__" else " ".join(messages)
            for name, messages in error.message_dict.items()
        )
    if isinstance(error, ValidationError):
        return " ".join(error.messages)
    return str(error)


def _import_lines(
    *, lines: Iterable[str | bytes], team: Team, kind: str, import_one: Callable[..., str]
) -> ImportReport:
    """Import line by line with per-row embedding deferred; one batched backfill of the team's
    pending rows is queued at the end (batches encode far faster than single rows)."""
    started = datetime.now(timezone.utc)
    with embeddings_deferred():
        report = _import_each(lines=lines, team=team, import_one=import_one)
    if (report.created or report.updated) and report.interrupted_at is None:
        try:  # in development the backfill runs here and now (the immediate task backend)
            embedding_schedule_backfill(kind=kind, team=team, written_since=started)
        except KeyboardInterrupt:  # the finished batches are committed; the rest stay pending
            report.embedding_interrupted = True
            return report
        # Many rows at once move the team's average length: keep the keyword heads tight (keyword.py).
        report.impacts_refreshed = keyword_impacts_refresh_if_drifted(team=team, kinds=(kind,))
    return report


def _import_each(*, lines: Iterable[str | bytes], team: Team, import_one: Callable[..., str]) -> ImportReport:
    report = ImportReport()
    try:
        _import_lines_into(report, lines=lines, team=team, import_one=import_one)
    except KeyboardInterrupt as stop:  # each line is its own transaction: the ones before are kept
        report.interrupted_at = report.lines_read + isinstance(stop, InterruptedWhileReading)
    except SourceUnreadable as error:  # as at the file's end: the lines before are kept
        report.unreadable = error.reason
    return report


def _readable(lines: Iterable[str | bytes]):
    """The lines, with a failed read told apart from a failed line: an OSError out of the file
    was a traceback, and a team --create-team made for the import stayed behind. A stop while
    waiting for a line is told apart too: it was said to land on the line already imported."""
    iterator = iter(lines)
    while True:
        try:
            line = next(iterator)
        except StopIteration:
            return
        except OSError as error:
            raise SourceUnreadable(error.strerror or str(error)) from error
        except KeyboardInterrupt as stop:
            raise InterruptedWhileReading from stop
        yield line


def _import_lines_into(report: ImportReport, *, lines: Iterable[str | bytes], team: Team,
                       import_one: Callable[..., str]) -> None:
    claims = _Claims()
    reset = _claims.set(claims)
    try:
        _import_each_line(report, lines=lines, team=team, import_one=import_one, claims=claims)
    finally:
        _claims.reset(reset)


def _import_each_line(report: ImportReport, *, lines: Iterable[str | bytes], team: Team,
                      import_one: Callable[..., str], claims: _Claims) -> None:
    first_line_of: dict[str, int] = {}  # external_id -> the line that imported it
    first_line_of_uid: dict[uuid.UUID, int] = {}
    for number, raw_line in enumerate(_readable(lines), start=1):
        report.lines_read = number
        if isinstance(raw_line, bytes):  # a file read as bytes: each line decoded on its own
            try:
                raw_line = raw_line.decode("utf-8")
            except UnicodeDecodeError as error:
                report.errors.append((number, f"not UTF-8 text ({error.reason} at byte {error.start + 1} of the line)"))
                continue
        # A byte-order mark some editors write, on the first line or where files were joined.
        raw_line = raw_line.removeprefix("\ufeff")
        if not raw_line.strip():
            continue
        try:
            data = _read_json(raw_line)
            if not isinstance(data, dict):
                raise LineError(f"expected a JSON object, got {json_type(data)}")
            # as stored (lessons.text.clean_identifier): " a" and "a\u200b" are the row "a"
            given_id = data.get("external_id")
            external_id = (clean_identifier(given_id) or "") if isinstance(given_id, str) else ""
            if external_id in first_line_of:
                # Two lines for one row: the later would silently replace the earlier, and a re-run
                # of the same file would report "updated" for a file that did not change.
                raise LineError(f"external_id {external_id!r} is on line {first_line_of[external_id]} too; "
                                "a file holds each row once")
            uid = _uid(data)
            if uid in first_line_of_uid:
                raise LineError(f"uid '{uid}' is on line {first_line_of_uid[uid]} too; a file holds each row once")
            outcome = _import_one_line(import_one, team=team, data=data)
        except json.JSONDecodeError as error:
            if "\r" in raw_line.rstrip("\r\n"):  # the whole file read as one line
                report.errors.append((number, "the lines end in CR alone (classic Mac line ends); save the file "
                                              "with LF (or CRLF) line ends"))
                continue
            report.errors.append((number, _broken_json(error, raw_line)))
            continue
        except (LineError, ValidationError, TypeError, ValueError) as error:
            report.errors.append((number, _describe(error)))
            continue
        except (DataError, OperationalError) as error:
            # the backstop: the readers refuse what they know the database refuses
            if not isinstance(error, DataError) and not over_a_database_limit(error):
                raise  # an outage, not this line's fault
            report.errors.append((number, f"a value the database cannot store ({first_line(error)})"))
            continue
        if external_id:
            first_line_of[external_id] = number
        if uid is not None:
            first_line_of_uid[uid] = number
        claims.imported |= claims.this_line
        if isinstance(outcome, tuple):  # imported, with a note on what was left out
            outcome, note = outcome
            report.notes.append((number, note))
        setattr(report, outcome, getattr(report, outcome) + 1)


def _broken_json(error: json.JSONDecodeError, raw_line: str) -> str:
    """Where the line's JSON breaks. A line that ends before its JSON does (a file cut short, an
    object never closed) is said so: the parser's position was past the line's end, "column 1"
    of a next line the file does not have."""
    line = raw_line.rstrip("\r\n")
    if error.msg.startswith("Unterminated string"):  # a string the line never closed: where it starts
        return (f"broken JSON: the line ends before its JSON does (a string starting at column {error.colno} "
                "is never closed; a file cut short?)")
    if error.pos >= len(line):
        return f"broken JSON: the line ends before its JSON does ({error.msg}; a file cut short?)"
    return f"broken JSON: {error.msg} (column {error.colno})"


def _read_json(raw_line: str):
    """The line's JSON; a line nested too deep or holding a 5,000-digit number is a bad line in
    plain words (it was a RecursionError traceback that stopped the import, or Python's advice);
    so is an object naming a key twice, whose last value Python would have kept without a word."""
    try:
        return strict_json.loads(raw_line)
    except (RecursionError, ValueError) as error:
        if message := unreadable_json(error):
            raise LineError(message) from None
        raise


def _import_one_line(import_one: Callable[..., str], *, team: Team, data: dict):
    """One line in its own transaction. Another import storing the same external_id at the same
    moment makes this one's create fail: on the unique constraint, or, when that writer committed
    between this line's lookup and its create, on the services' own check of the id. Either way
    the row is there now and the line is an update (or unchanged), so it is tried once more."""
    _forget_this_lines_claims()
    try:
        with transaction.atomic():
            return import_one(team=team, data=data)
    except (IntegrityError, ValidationError) as error:
        if isinstance(error, ValidationError) and "external_id" not in getattr(error, "message_dict", {}):
            raise
        _forget_this_lines_claims()  # the first try's rows were rolled back
        try:
            with transaction.atomic():
                return import_one(team=team, data=data)
        except IntegrityError:
            raise LineError(f"another writer stored the same row at the same moment ({first_line(error)}); "
                            "run the import again") from error


def _forget_this_lines_claims() -> None:
    if (claims := _claims.get()) is not None:
        claims.this_line.clear()


def _import_into_team(*, lines, team_slug: str, create_team: bool, kind: str, import_one) -> ImportReport:
    """An unknown team raises TeamError unless `create_team`: a typo must not start a new team.
    A team this import created is not kept when no line made it in (an all-bad file, a file that
    is not the one meant): a failed import leaves nothing behind."""
    existed = Team.objects.filter(slug=(team_slug or "").strip()).exists()
    team = team_for_slug(slug=team_slug, create=create_team)
    report = _import_lines(lines=lines, team=team, kind=kind, import_one=import_one)
    nothing_in = not (report.created or report.updated or report.unchanged)
    # ... and nothing another writer put in meanwhile (a second import with --create-team at once)
    if not existed and nothing_in and not (team.lessons.exists() or team.memories.exists()):
        team.delete()
        report.team_removed = True
    return report


def import_lessons(*, lines: Iterable[str | bytes], team_slug: str, create_team: bool = False) -> ImportReport:
    return _import_into_team(
        lines=lines, team_slug=team_slug, create_team=create_team, kind="lessons", import_one=_import_lesson
    )


def import_memories(*, lines: Iterable[str | bytes], team_slug: str, create_team: bool = False) -> ImportReport:
    return _import_into_team(
        lines=lines, team_slug=team_slug, create_team=create_team, kind="memories", import_one=_import_memory
    )
