"""What `manage.py` says when a command cannot go on because of the database, instead of a traceback.

An operator who points DATABASE_URL at a server that is down, or runs a command before `migrate`,
needs one line saying what is wrong and what to do; a traceback through Django's ORM says neither.
A setting the environment got wrong (`ImproperlyConfigured`: a value out of range, a backend that
cannot be imported, a missing secret) is one line too, naming the variable.
Errors that are bugs (a bad query, a constraint the code should have checked) keep their traceback:
`operator_message` answers None for them. `--traceback` keeps every traceback.
"""

import errno

import psycopg
from django.core.exceptions import ImproperlyConfigured
from django.db import DatabaseError, InterfaceError, OperationalError, ProgrammingError

from lessons.error_text import first_line, schema_behind


# Commands that only read: "work committed before the error is kept" means nothing to them.
READING_COMMANDS = {"search", "list_api_keys", "check", "showmigrations", "sqlmigrate", "dbshell"}


# Input or output the machine failed, not the code: a full disk (`search ... > /dev/full`), a read
# error of a disk or network file system, a quota, a read-only file system.
_IO_FAILURES = {errno.ENOSPC, errno.EIO, errno.EDQUOT, errno.EROFS, errno.EFBIG, errno.ENXIO}


def operator_message(error: BaseException, *, database_url_set: bool, command: str = "") -> str | None:
    """One line for an operator, or None when the error is not the operator's to fix."""
    if isinstance(error, ImproperlyConfigured):
        # django-tasks says "Could not find backend 'x'" without the variable that named it
        variable = "TASKS_BACKEND: " if type(error).__name__ == "InvalidTaskBackendError" else ""
        return f"a setting is wrong: {variable}{first_line(error)} (see the README's Settings, or .env)"
    if isinstance(error, OSError) and error.errno in _IO_FAILURES:
        where = f" ({error.filename})" if error.filename else ""
        message = f"input or output failed: {error.strerror}{where}."
        if command not in READING_COMMANDS:
            message += " Work committed before the error is kept; a re-run carries on."
        return message
    if isinstance(error, UnicodeEncodeError) and "surrogates not allowed" in str(error):
        return _not_utf8(error)
    if not isinstance(error, (DatabaseError, psycopg.OperationalError)):
        return None
    reason = first_line(error)
    if schema_behind(error):
        return (f"the database is not migrated to this version of the code ({reason}); "
                "run `python manage.py migrate` first.")
    if isinstance(error, ProgrammingError):
        return None
    # psycopg's own: the embedded server's start (settings) connects before Django wraps anything
    if isinstance(error, (OperationalError, InterfaceError, psycopg.OperationalError)):
        where = ("check that the server DATABASE_URL names is running and accepts this user" if database_url_set
                 else "the embedded server runs from EMBEDDED_POSTGRES_DIR (default .data/postgres)")
        message = f"the database is unavailable ({reason}); {where}."
        if command not in READING_COMMANDS:
            message += " Work committed before the error is kept; a re-run carries on."
        return message
    return None


def argument_not_utf8(arguments: list[str]) -> str | None:
    """The line for the first command-line argument whose bytes are not UTF-8, or None. manage.py
    asks before any command starts, so every command refuses one alike: left to each, a slug was
    "not a usable slug" ('caf\\udce9'), a file name "no such file" (or the file was read, and its
    lines' errors named it with the surrogate), and only what reached the database said this."""
    for argument in arguments:
        try:
            argument.encode("utf-8")
        except UnicodeEncodeError as error:
            return _not_utf8(error)
    return None


def _not_utf8(error: UnicodeEncodeError) -> str:
    """A command-line argument with bytes that are not UTF-8 (Python keeps them as lone surrogates,
    which the database driver cannot send: a traceback from deep in psycopg, for `--team $'\\xff'`
    or a search query): one line showing the argument as the bytes it was."""
    text = error.object if isinstance(error.object, str) else ""
    shown = text.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace") if text else ""
    where = f" ('{shown[:80]}')" if shown else ""
    return (f"an argument{where} is not UTF-8 text; give it in UTF-8 (the terminal's or the shell's "
            "encoding, or a $'\\x..' escape, sent other bytes).")
