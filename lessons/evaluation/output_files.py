"""The files the measuring commands write (`--json`, eval_retrieval's `--hits`): never one the run
reads, and whole or not at all.

An output path naming one of the dataset's own files (`--hits ds/corpus.jsonl`, or a link to it)
replaced that file with the figures: it is refused before anything is read. An output is written
to a temporary file beside PATH and renamed over it once complete, as the exports write, so a run
stopped or failing half way (Ctrl-C, SIGTERM, a full disk) leaves the previous run's file as it
was: the hits file was opened for writing before the first search, and a stopped run left it
empty or cut mid-line. A PATH that is a pipe or a device (`/dev/stdout`, `>(gzip > hits.gz)`) is
written into: renamed over, a named pipe became a regular file its reader never saw.
"""

import json
import os
import stat
import tempfile
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TextIO

from django.core.management.base import CommandError


def refuse_outputs_over_inputs(outputs: dict[str, Path | None], *, inputs: Iterable[Path]) -> None:
    """CommandError when an output (option -> path) is one of the files the run reads: the same
    file by name, through a symbolic link, or as a hard link of it."""
    inputs = list(inputs)
    for option, path in outputs.items():
        for source in inputs if path is not None else ():
            if _same_file(path, source):
                raise CommandError(f"{option}: cannot write {path}: it is the dataset's {source}, which this run reads")


def _same_file(first: Path, second: Path) -> bool:
    try:
        return os.path.samefile(first, second)
    except OSError:  # either is missing (a new output file, a layout's optional file): not the same
        return False


class OutputFile:
    """A text file being written: a write that fails (a full disk) says the option and the file."""

    def __init__(self, stream: TextIO, *, path: Path, option: str):
        self._stream = stream
        self._path = path
        self._option = option

    def write(self, text: str) -> None:
        with named_on_failure(self._path, option=self._option):
            self._stream.write(text)


@contextmanager
def named_on_failure(path: Path, *, option: str) -> Iterator[None]:
    try:
        yield
    except OSError as error:  # `No space left on device` alone named no file
        raise CommandError(f"{option}: cannot write {path}: {error.strerror or error}") from error


@contextmanager
def written_whole(path: Path, *, option: str) -> Iterator[OutputFile]:
    """`with written_whole(path, option="--hits") as out: out.write(...)`: PATH holds what was written
    once the block ends; an error or an interrupt inside it leaves PATH as it was."""
    if _is_stream(path):
        with named_on_failure(path, option=option):
            stream = open(path, "w", encoding="utf-8")
        finish, discard = stream.close, lambda: None
    else:
        # A symbolic link (a "latest results" link) is followed: the file it names is replaced, the
        # link stays (the rename would replace the link itself with a regular file).
        target = path.resolve() if path.is_symlink() else path
        stream, temporary = _temporary_beside(target, path=path, option=option)

        def finish() -> None:
            stream.flush()
            os.fsync(stream.fileno())  # on disk before the rename makes it the file under PATH
            stream.close()
            os.replace(temporary, target)

        def discard() -> None:
            temporary.unlink(missing_ok=True)

    try:
        yield OutputFile(stream, path=path, option=option)
        with named_on_failure(path, option=option):
            finish()
    except BaseException:
        try:
            stream.close()  # what it still buffers is thrown away with it
        except OSError:
            pass
        discard()
        raise


def _temporary_beside(target: Path, *, path: Path, option: str) -> tuple[TextIO, Path]:
    # The name cut short: a PATH near the 255-byte limit left no room for the temporary's.
    prefix = f".{target.name.encode()[:200].decode(errors='ignore')}."
    with named_on_failure(path, option=option):
        descriptor, name = tempfile.mkstemp(dir=target.parent, prefix=prefix, suffix=".partial")
    temporary = Path(name)
    try:
        with named_on_failure(path, option=option):
            # mkstemp's file is its owner's alone; the figures get the mode a plain write gave them
            # (the replaced file's, or a new file's under the umask).
            os.fchmod(descriptor, _mode_of(target))
            return os.fdopen(descriptor, "w", encoding="utf-8", newline="\n"), temporary
    except BaseException:
        os.close(descriptor)
        temporary.unlink(missing_ok=True)
        raise


def _mode_of(target: Path) -> int:
    try:
        return stat.S_IMODE(target.stat().st_mode)
    except FileNotFoundError:
        umask = os.umask(0o077)  # read by setting it; restrictive meanwhile
        os.umask(umask)
        return 0o666 & ~umask


def _is_stream(path: Path) -> bool:
    """A pipe, socket or device: something to write into, never to replace (links followed)."""
    return path.exists() and not path.is_file() and not path.is_dir()


def write_json_whole(path: Path, payload, *, stdout, option: str = "--json") -> None:
    with written_whole(path, option=option) as out:
        out.write(json.dumps(payload, indent=2) + "\n")
    stdout.write(f"wrote {path}")


def interrupted_error(*, unwritten: dict[str, Path | None], kept: str) -> CommandError:
    """The one line a stopped run ends with: each output not yet written and what stays."""
    outputs = [f"{option} {path} {'left as it was' if path.exists() else 'not written'}"
               for option, path in unwritten.items() if path is not None]
    return CommandError("interrupted (Ctrl-C or SIGTERM): " + "; ".join([*outputs, kept]), returncode=130)
