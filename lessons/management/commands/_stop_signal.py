"""A stop signal handled as Ctrl-C by the commands that write in batches: a process manager, a
container's stop or `kill` sends SIGTERM, which ended the process at once (status 143) without
the line saying what was kept. Under this context it raises KeyboardInterrupt, so the command
stops where Ctrl-C stops it: the batch under way rolls back, the finished ones stay, and the
command says so."""

import signal
import threading
from contextlib import contextmanager


def _interrupt(signum, frame):
    raise KeyboardInterrupt


@contextmanager
def stop_signal_as_interrupt():
    if threading.current_thread() is not threading.main_thread():  # only the main thread may set handlers
        yield
        return
    previous = signal.signal(signal.SIGTERM, _interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
