"""Filters for the LOGGING setting."""

import logging


class WithoutTraceback(logging.Filter):
    """A client's mistake Django refuses (a wrong Host header, a CSRF failure) is one line in the
    log: the traceback Django attaches shows only its own middleware."""

    def filter(self, record: logging.LogRecord) -> bool:
        record.exc_info = None
        record.exc_text = None
        return True
