"""The shared shape of `import_lessons` and `import_memories`: JSON Lines from a file, a pipe or a
device (`<(zcat backup.jsonl.gz)`, `/dev/stdin`), or (PATH `-`) standard input.

The lines are read once, in order, each imported as it is read: nothing needs a second pass, the
file's size or a seek, so a stream is read as a file is, a line at a time, with nothing spooled.
Only a regular file was taken, to refuse a folder; a folder, a socket or a disk still is refused."""

import json
import stat
import sys
from contextlib import nullcontext
from dataclasses import dataclass
from pathlib import Path

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from lessons.management.commands._stop_signal import stop_signal_as_interrupt
from lessons.services.imports import LESSON_KEYS, MEMORY_KEYS

STDIN = "-"
STDIN_NAME = "<stdin>"  # what messages call standard input, before a line number: `<stdin>:3: ...`
BYTE_ORDER_MARK = "\ufeff"


@dataclass(frozen=True)
class ExportShape:
    """What a line of one kind's export holds: the fields its import takes and the one it needs."""

    kind: str  # "lessons" or "memories"
    one: str  # "lesson" or "memory"
    fields: frozenset[str]
    required: str


SHAPES = {
    "lessons": ExportShape(kind="lessons", one="lesson", fields=frozenset(LESSON_KEYS), required="title"),
    "memories": ExportShape(kind="memories", one="memory", fields=frozenset(MEMORY_KEYS), required="content"),
}


class JsonLinesImportCommand(BaseCommand):
    kind = ""  # "lessons" or "memories"
    stealth_options = ("stdin",)  # call_command(..., stdin=BytesIO(...)), as createsuperuser takes it

    def add_arguments(self, parser):
        parser.add_argument("path", help="A JSON Lines file, one object a line; a pipe or device "
                                         "(<(zcat backup.jsonl.gz)), or - for standard input.")
        parser.add_argument("--team", required=True, help="Slug of an existing team.")
        parser.add_argument("--create-team", action="store_true", help="Create the team if it does not exist.")

    def import_lines(self, *, lines, team_slug, create_team):  # pragma: no cover - abstract
        raise NotImplementedError

    def handle(self, *args, path, team, create_team=False, **options):
        name = STDIN_NAME if path == STDIN else path
        # Around the open too: a named pipe's open waits for its writer, and SIGTERM ended that wait
        # at once (status 143), where Ctrl-C is one line.
        with stop_signal_as_interrupt():
            source = _standard_input(options.get("stdin")) if path == STDIN else _opened(path)
            try:
                with source as lines:
                    watched = OtherKindWatch(lines, expected=SHAPES[self.kind])
                    report = self.import_lines(lines=watched, team_slug=team, create_team=create_team)
            except ValueError as error:  # an unknown or unusable team (TeamError)
                raise CommandError(str(error)) from error
        other = watched.other
        if watched.stopped_at is not None:
            # Every line would fail on "unknown field(s)" (116 lines of them for a memories export)
            # without naming the command that takes the file.
            raise CommandError(
                f"{name}:{watched.stopped_at}: this looks like a {other.kind} export: use import_{other.kind} "
                f"(the line has a {other.one}'s fields and no {SHAPES[self.kind].required}); nothing was imported"
            )

        team, loud = team.strip(), options.get("verbosity", 1) >= 1  # -v 0: only what went wrong
        for number, reason in report.errors:
            self.stderr.write(f"{name}:{number}: {reason}")
        if watched.other_kind_lines:
            self.stderr.write(f"{name}: {watched.other_kind_lines} line(s) look like a {other.kind} export: use "
                              f"import_{other.kind} for them")
        for number, note in report.notes:
            self.stderr.write(f"{name}:{number}: note: {note}")
        if loud:
            self.stdout.write(f"{self.kind} into team {team!r}: {report.summary()}")
        if report.interrupted_at is not None:
            raise CommandError(
                f"interrupted (Ctrl-C or SIGTERM) at line {report.interrupted_at}: the lines before it are imported "
                "as counted above, nothing after; run the same command again to import the rest (lines already "
                "imported come out unchanged).", returncode=130,
            )
        if report.embedding_interrupted:
            raise CommandError(
                "interrupted (Ctrl-C or SIGTERM) while embedding: every row counted above is stored, and the ones "
                f"not yet embedded are found by keywords until `python manage.py backfill_embeddings --team {team}` "
                "embeds them.", returncode=130,
            )
        written = report.created + report.updated
        # A line merged away by curators was read: the file was not empty (it said so). An unreadable
        # file is said below, once the summary and the team are.
        said = written or report.unchanged or report.merged_away or report.errors
        if not said and report.unreadable is None:
            self.stderr.write(f"{name}: no row to import (the file is empty or holds only blank lines)")
        elif written and not settings.EMBEDDINGS_ENABLED:
            self.stderr.write(
                f"note: the model is off (EMBEDDINGS_ENABLED=0): the {written} row(s) written are found by "
                f"keywords until `python manage.py backfill_embeddings --team {team}` embeds them"
            )
        if loud and report.team_removed:
            self.stdout.write(f"team {team!r} not kept: it was created for this import and nothing was imported")
        if loud:
            for kind, postings in report.impacts_refreshed.items():
                self.stdout.write(f"keyword index: {kind} impacts refreshed ({postings} postings)")
        if report.unreadable is not None:
            if not report.lines_read:
                raise CommandError(f"{name}: cannot read it: {report.unreadable}")
            raise CommandError(f"{name}: cannot read it past line {report.lines_read}: {report.unreadable}; "
                               "the lines before it are imported as counted above")
        if not report.ok:
            imported = report.created + report.updated + report.unchanged
            others = "the others were." if imported else "no line was."
            raise CommandError(f"{len(report.errors)} line(s) could not be imported; {others}")


def _opened(path: str):
    """PATH opened for reading, refused before any team is made for it."""
    source = Path(path)
    try:
        mode = source.stat().st_mode
    except FileNotFoundError:
        raise CommandError(f"{path}: no such file") from None
    except OSError as error:  # a symlink loop (exists() said "no such file"), a name too long (a traceback)
        raise CommandError(f"{path}: {error.strerror or error}") from error
    # A pipe or a character device is read as a file is; a folder, a socket or a disk is not a file of lines.
    if not (stat.S_ISREG(mode) or stat.S_ISFIFO(mode) or stat.S_ISCHR(mode)):
        raise CommandError(f"{path}: not a regular file (a JSON Lines file is expected)")
    try:
        # Bytes: each line is decoded on its own, so a line that is not UTF-8 is reported with
        # its number like any bad line, and the good ones are imported.
        return source.open("rb")
    except OSError as error:  # a file this user may not read: before any team is made for it
        raise CommandError(f"{path}: cannot read it: {error.strerror or error}") from error


def _standard_input(given):
    """Standard input's bytes (a text stream without bytes under it, such as a StringIO, as it is),
    left open at the end: it is the process's, not the command's."""
    stream = sys.stdin if given is None else given
    if stream is None:  # started with stdin closed (`<&-`): every read failed on None, in a traceback
        raise CommandError("standard input is closed; pipe the JSON Lines into it, or name a file instead of -")
    return nullcontext(getattr(stream, "buffer", stream))


class OtherKindWatch:
    """The lines, passed on as they are read, watched for the other kind's export: a memories
    export given to import_lessons (or the reverse). A first line of it ends the lines there, as
    if the file ended, so nothing is written and a team --create-team made is not kept; a later
    line of it is counted, for one sentence after its errors. Only a line naming the other kind's
    required field is parsed a second time."""

    def __init__(self, lines, *, expected: ExportShape):
        self._lines = iter(lines)
        self.other = next(shape for shape in SHAPES.values() if shape != expected)
        self._marker = f'"{self.other.required}"'
        self._number = 0
        self._first_seen = False
        self.stopped_at: int | None = None  # the first line, when it is the other kind's
        self.other_kind_lines = 0

    def __iter__(self):
        return self

    def __next__(self):
        if self.stopped_at is not None:
            raise StopIteration
        line = next(self._lines)  # a failed read or a Ctrl-C reaches the import as before
        self._number += 1
        if self._first_seen:
            self.other_kind_lines += self._is_other_kind(line)
            return line
        if _is_blank(line):
            return line  # the first line is still to come
        self._first_seen = True
        if self._is_other_kind(line):
            self.stopped_at = self._number
            raise StopIteration
        return line

    def _is_other_kind(self, line: str | bytes) -> bool:
        """Only the other kind's fields, its required one among them (so none of this kind's own)."""
        marker = self._marker.encode() if isinstance(line, bytes) else self._marker
        if marker not in line:  # most lines: no second parse
            return False
        try:
            # bytes are decoded as UTF-8, a byte-order mark allowed; a str must lose its mark first
            data = json.loads(line if isinstance(line, bytes) else line.removeprefix(BYTE_ORDER_MARK))
        except (ValueError, RecursionError):  # not UTF-8 or not JSON: the import says what is wrong
            return False
        return isinstance(data, dict) and self.other.required in data and set(data) <= self.other.fields


def _is_blank(line: str | bytes) -> bool:
    if isinstance(line, bytes):
        return not line.removeprefix(BYTE_ORDER_MARK.encode()).strip()
    return not line.removeprefix(BYTE_ORDER_MARK).strip()
