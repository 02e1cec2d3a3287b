"""An exception's words, shortened for a message or a log line. psycopg's messages run over several
lines (the error, then DETAIL, HINT, or the socket it tried): an answer takes the first, a log line
all of them on one line."""


def first_line(error: BaseException) -> str:
    """The first line of the message (the error itself), or the exception's name when it has none."""
    lines = str(error).strip().splitlines()
    return lines[0].strip() if lines else type(error).__name__


def one_line(error: BaseException) -> str:
    """The whole message on one line, for a log that keeps one entry a line."""
    return " ".join(str(error).split()) or type(error).__name__
