"""An exception's words, shortened for a message or a log line. psycopg's messages run over several
lines (the error, then DETAIL, HINT, or the socket it tried): an answer takes the first, a log line
all of them on one line."""

import sys

from lessons.strict_json import DuplicateKey


def first_line(error: BaseException) -> str:
    """The first line of the message (the error itself), or the exception's name when it has none."""
    lines = str(error).strip().splitlines()
    return lines[0].strip() if lines else type(error).__name__


def one_line(error: BaseException) -> str:
    """The whole message on one line, for a log that keeps one entry a line."""
    return " ".join(str(error).split()) or type(error).__name__


def json_type(value) -> str:
    """JSON's name for a value's type, not Python's (`null`, not NoneType)."""
    if value is None:
        return "null"
    return {bool: "a boolean", int: "a number", float: "a number", str: "a string", list: "an array",
            dict: "an object"}.get(type(value), type(value).__name__)


def unreadable_json(error: BaseException) -> str | None:
    """Plain words for JSON that Python's reader gives up on without a JSON syntax error: nesting
    deeper than its recursion limit, a number past its digit limit (whose message advises
    `sys.set_int_max_str_digits()`, meant for Python programmers), or an object naming a key twice
    (`lessons.strict_json`). None for any other error."""
    if isinstance(error, DuplicateKey):
        return str(error)
    if isinstance(error, RecursionError):
        return "the JSON is nested too deeply to read; no field of this store nests more than a few levels"
    if isinstance(error, ValueError) and "int_max_str_digits" in str(error):
        return f"a number in the JSON has more than {sys.get_int_max_str_digits():,} digits"
    return None


def over_a_database_limit(error: BaseException) -> bool:
    """A value past one of PostgreSQL's own limits (SQLSTATE class 54, "program limit exceeded": an
    index entry over 2,704 bytes, ...). psycopg raises it as an OperationalError, but it is the
    writer's to fix, like a DataError, not an outage; the models' checks should have caught it."""
    return str(getattr(error.__cause__, "sqlstate", "") or "").startswith("54")


def lost_to_a_concurrent_write(error: BaseException) -> bool:
    """The database ended the transaction to settle it with a concurrent one (a deadlock, SQLSTATE
    40P01, or a serialization failure, 40001): nothing of it stays, and the same request sent
    again can succeed. Not an outage."""
    return getattr(error.__cause__, "sqlstate", None) in ("40P01", "40001")


def schema_behind(error: BaseException) -> bool:
    """A database error from a table, column or function the code has and the database lacks: the
    code runs before `migrate` did (a deploy's order, a restored backup). A function is an
    extension's that a migration creates (`unaccent`, `levenshtein_less_equal`)."""
    from psycopg import errors as pg_errors  # only once a database error has happened

    missing = (pg_errors.UndefinedTable, pg_errors.UndefinedColumn, pg_errors.UndefinedFunction)
    return isinstance(error.__cause__, missing)
