"""The shared shape of `export_lessons` and `export_memories`: a team's rows as JSON Lines, in
the format the matching import reads, to a file or (PATH `-`) to stdout.

A file is written whole or not at all, readable by its owner only (lessons/output_files.py): the
lines go to a temporary file beside PATH, renamed over it once complete, so Ctrl-C or an error
never leaves half a file under PATH; a pipe or a device (`>(gzip > backup.gz)`) is written into.
Everything is read in one REPEATABLE READ transaction: an edit made during the export is in the
file whole or not at all (never half of a memory's versions).
"""

import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError
from django.db import connection, transaction

from lessons.management.commands._stop_signal import stop_signal_as_interrupt
from lessons.management.commands._team_option import team_from_option
from lessons.models import Team
from lessons.output_files import is_stream, written_whole

STDOUT = "-"


class JsonLinesExportCommand(BaseCommand):
    kind = ""  # "lessons" or "memories"
    one = ""  # "lesson" or "memory"

    def add_arguments(self, parser):
        parser.add_argument("path", help="The JSON Lines file to write, or - for stdout.")
        parser.add_argument("--team", required=True, help="Slug of the team to export.")
        parser.add_argument("--force", action="store_true", help="Replace PATH if it exists.")

    def rows(self, *, team: Team) -> Iterator[dict]:  # pragma: no cover - abstract
        raise NotImplementedError

    def tally(self, row: dict) -> None:
        """Called with each row written, for the summary."""

    def what(self, count: int) -> str:
        return f"{count} {self.one if count == 1 else self.kind}"

    def handle(self, *args, path, team, force=False, **options):
        target = None if path == STDOUT else _checked_target(path, force=force)
        with stop_signal_as_interrupt():
            try:
                with _snapshot():
                    exported = team_from_option(team)
                    rows = self.rows(team=exported)
                    count = self._write_stdout(rows) if target is None else self._write_file(target, rows)
            except KeyboardInterrupt:
                kept = "the lines before it are on stdout" if target is None else f"nothing was written to {path}"
                raise CommandError(f"interrupted (Ctrl-C or SIGTERM): {kept}", returncode=130) from None
        if options.get("verbosity", 1) >= 1:
            # With `-` stdout carries the data alone, so the summary goes to stderr.
            out = self.stderr if target is None else self.stdout
            where = "stdout" if target is None else path
            summary = f"exported {self.what(count)} of team {exported.slug!r} to {where}"
            out.write(summary, style_func=lambda text: text)  # not stderr's error colour: it went well

    def _write_lines(self, write, rows: Iterator[dict]) -> int:
        count = 0
        try:
            for row in rows:
                write(json.dumps(row, ensure_ascii=False) + "\n")  # the key order is the row's (selectors/exports.py)
                self.tally(row)
                count += 1
        finally:
            # A write that failed leaves the rows' database cursor open: closed here, inside the
            # transaction, not later by the garbage collector once the transaction has ended.
            close = getattr(rows, "close", None)
            if close is not None:
                close()
        return count

    def _write_stdout(self, rows: Iterator[dict]) -> int:
        # UTF-8 bytes whatever the locale says, as in a file: the contract is about bytes.
        binary = getattr(self.stdout, "buffer", None)
        if binary is None:  # a text stream without bytes under it (call_command's StringIO)
            return self._write_lines(self.stdout.write, rows)
        try:
            count = self._write_lines(lambda text: binary.write(text.encode("utf-8")), rows)
            binary.flush()
        except BrokenPipeError:
            raise  # `| head`: the reader closed the pipe, having what it wanted; handled as before
        except OSError as error:  # `> /dev/full`: a traceback said no more than this
            raise CommandError(f"cannot write to stdout: {error.strerror or error}") from error
        return count

    def _write_file(self, target: Path, rows: Iterator[dict]) -> int:
        # Private (mode 0600): an export holds a team's memories.
        with written_whole(target, private=True) as out:
            return self._write_lines(out.write, rows)


def _checked_target(path: str, *, force: bool) -> Path:
    """Checked before anything is read, so a typo fails at once."""
    try:
        os.stat(path)
    except (FileNotFoundError, NotADirectoryError):
        pass  # a new file (or a link to one); a missing folder is said below
    except OSError as error:  # a symlink loop (resolve()'s RuntimeError), a name too long: tracebacks
        raise CommandError(f"{path}: {error.strerror or error}") from error
    if is_stream(Path(path)):
        return Path(path)  # opened as given: /dev/fd/63's link names no path (`pipe:[...]`)
    # A symbolic link (a "latest backup" link) is followed: the file it names is replaced, the link
    # stays (the rename replaced the link itself with a regular file).
    target = Path(path).resolve() if Path(path).is_symlink() else Path(path)
    if target.is_dir():
        raise CommandError(f"{path}: is a folder; name the file to write")
    if not target.parent.is_dir():
        raise CommandError(f"{path}: its folder {target.parent} does not exist")
    if target.exists() and not force:
        raise CommandError(f"{path}: the file exists; add --force to replace it")
    return target


@contextmanager
def _snapshot():
    nested = connection.in_atomic_block  # inside a caller's transaction (a test): its snapshot stands
    with transaction.atomic():
        if not nested:  # only a transaction's first statement may set its isolation level
            with connection.cursor() as cursor:
                cursor.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
        yield
