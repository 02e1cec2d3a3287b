"""Files the commands write whole or not at all: the exports' PATH, the measuring commands' `--json`
and `--hits`.

The text goes to a temporary file beside PATH, fsynced and renamed over PATH once complete, so a
run stopped or failing half way (Ctrl-C, SIGTERM, a full disk) never leaves half a file under PATH:
a new PATH is not created, an old one is left as it was. A PATH that is a pipe or a device
(`>(gzip > backup.gz)`, `/dev/stdout`) is written into: renamed over, a named pipe became a regular
file its reader never saw (and `/dev/full`, as root, a file in /dev).

Two things differ between the callers, on purpose, and are switches here: an export is created
readable by its owner only (`private`: it holds a team's memories) where measured figures get the
mode a plain write gave them; and the measuring commands name the option that gave PATH in every
error (`option`: "--hits: cannot write PATH: ..."), where an export's message names PATH alone
("cannot write PATH: ...", or "cannot write in FOLDER: ..." when no temporary can be made there).
"""

import os
import stat
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TextIO

from django.core.management.base import CommandError


def is_stream(path: Path) -> bool:
    """A pipe, socket or device: something to write into, never to replace (links followed)."""
    return path.exists() and not path.is_file() and not path.is_dir()


class OutputFile:
    """A text file being written: a write that fails (a full disk) is a CommandError naming the file."""

    def __init__(self, stream: TextIO, *, path: Path, option: str | None):
        self._stream = stream
        self._path = path
        self._option = option

    def write(self, text: str) -> None:
        try:
            self._stream.write(text)
        except OSError as error:  # `No space left on device` alone named no file
            raise cannot_write(self._path, error, option=self._option) from error


def cannot_write(path: Path, error: OSError, *, option: str | None = None) -> CommandError:
    named = f"{option}: " if option else ""
    return CommandError(f"{named}cannot write {path}: {error.strerror or error}")


@contextmanager
def written_whole(path: Path, *, option: str | None = None, private: bool = False) -> Iterator[OutputFile]:
    """`with written_whole(path, option="--hits") as out: out.write(...)`: PATH holds what was written
    once the block ends; an error or an interrupt inside it leaves PATH as it was. `option` starts
    every error message; `private` creates the file mode 0600 instead of the mode a plain write gives."""
    if is_stream(path):
        try:
            stream = open(path, "w", encoding="utf-8", newline="\n")
        except OSError as error:
            raise cannot_write(path, error, option=option) from error
        finish, discard = stream.close, lambda: None
    else:
        # A symbolic link (a "latest backup" link) is followed: the file it names is replaced, the
        # link stays (the rename would replace the link itself with a regular file).
        target = path.resolve() if path.is_symlink() else path
        stream, temporary = _temporary_beside(target, path=path, option=option, private=private)

        def finish() -> None:
            stream.flush()
            os.fsync(stream.fileno())  # on disk before the rename makes it the file under PATH
            stream.close()
            os.replace(temporary, target)

        def discard() -> None:
            temporary.unlink(missing_ok=True)

    try:
        yield OutputFile(stream, path=path, option=option)
        try:
            finish()
        except OSError as error:
            raise cannot_write(path, error, option=option) from error
    except BaseException:
        try:
            stream.close()  # what it still buffers is thrown away with it
        except OSError:
            pass
        discard()
        raise


def _temporary_beside(target: Path, *, path: Path, option: str | None, private: bool) -> tuple[TextIO, Path]:
    # The name cut short: a PATH near the 255-byte limit left no room for the temporary's.
    prefix = f".{target.name.encode()[:200].decode(errors='ignore')}."
    try:
        descriptor, name = tempfile.mkstemp(dir=target.parent, prefix=prefix, suffix=".partial")
    except OSError as error:  # a folder this user may not write in: a traceback said no more
        if option:
            raise cannot_write(path, error, option=option) from error
        # Without an option to name, the folder is what the message can point at (the exports' words).
        raise CommandError(f"cannot write in {target.parent}: {error.strerror or error}") from error
    temporary = Path(name)
    try:
        try:
            if not private:
                # mkstemp's file is its owner's alone; this one gets the mode a plain write gave it
                # (the replaced file's, or a new file's under the umask).
                os.fchmod(descriptor, _mode_of(target))
            return os.fdopen(descriptor, "w", encoding="utf-8", newline="\n"), temporary
        except OSError as error:
            raise cannot_write(path, error, option=option) from error
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
