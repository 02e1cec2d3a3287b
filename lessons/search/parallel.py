"""The semantic legs on a connection of their own, while statement 1 runs on the request's.

A hybrid search used to run its statements one after the other: statement 1 (the keyword legs)
while the query encoded, then the semantic legs with the fields. The semantic legs read nothing
statement 1 finds, so a worker thread here waits for the encode and runs them (statement 2a) on
its own connection at the same time; the request's connection then fetches the union's fields
(statement 2b). The answer is the same; what changes is when the legs run. Measured, each bench
query both ways in turn: at 100,000 lessons hybrid p50 / p95 34.1 / 52.2 ms against 36.7 / 59.7
one after the other; on SciFact (5,183 abstracts, limit 100) 36.2 / 48.6 against 36.2 / 52.5.
Statement 1 is the longer of the two at every size, so the gain is the semantic legs' time.

When it does not: inside a transaction (`atomic`, and so in every `TestCase`) another connection
cannot see the caller's uncommitted rows, so the legs run on the request's connection after
statement 1, as they do with SEARCH_PARALLEL_LEGS = 0. A failure of the worker's connection (the
server refusing one more, say) falls back the same way, with a warning.

Only while the process is otherwise idle: a search runs its legs beside when at most
SEARCH_PARALLEL_LEGS searches (itself included) are under way in its process (default 1: alone).
Under load the cores are already busy with other searches, and splitting one search over two
connections only adds backends, round trips and thread hand-offs: with 8 clients on gunicorn's
2 x 4 threads, legs beside on every search served 3-27% fewer searches at a 24-28% higher p95
(`load_test`), so a busy process runs them after statement 1, as before.

Each worker thread keeps its connection like a request thread does: CONN_MAX_AGE and
CONN_HEALTH_CHECKS apply (`close_old_connections` before and after each job). A web process
therefore holds up to SEARCH_PARALLEL_LEGS more connections.
"""

import logging
import threading
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager

from django.conf import settings
from django.db import DatabaseError, close_old_connections, connection, connections

logger = logging.getLogger("lessons.search")

_lock = threading.Lock()
_runner: ThreadPoolExecutor | None = None
_runner_threads = 0
_searches_under_way = 0


@contextmanager
def search_under_way() -> Iterator[None]:
    """Count a search as under way in this process while it runs."""
    global _searches_under_way
    with _lock:
        _searches_under_way += 1
    try:
        yield
    finally:
        with _lock:
            _searches_under_way -= 1


def legs_beside_allowed() -> bool:
    """Whether a search may run its semantic legs on another connection now: outside a transaction,
    and while at most SEARCH_PARALLEL_LEGS searches are under way in this process."""
    return (
        0 < _searches_under_way <= settings.SEARCH_PARALLEL_LEGS
        and not connection.in_atomic_block
    )


def run_beside(job, /, **kwargs) -> Future:
    """Start `job(**kwargs)` on a worker thread with its own connection."""
    return _workers().submit(_with_connection, job, kwargs)


def result_or_none(future: Future):
    """The job's result, or None when its connection failed (the caller then runs it itself)."""
    try:
        return future.result()
    except DatabaseError as error:
        logger.warning("semantic legs on a second connection failed, running them on the request's: %s", error)
        return None


def close_worker_connections() -> None:
    """Close every worker thread's connection (tests call it before their database is dropped).
    Each thread takes exactly one of the jobs: each job waits at a barrier for all of them."""
    global _runner
    with _lock:
        runner, workers, _runner = _runner, _runner_threads, None
    if runner is None:
        return
    barrier = threading.Barrier(workers)

    def close_mine():
        connections.close_all()
        barrier.wait(timeout=30)

    for future in [runner.submit(close_mine) for _ in range(workers)]:
        future.result()
    runner.shutdown(wait=True)


def _workers() -> ThreadPoolExecutor:
    global _runner, _runner_threads
    with _lock:
        if _runner is None:
            _runner_threads = settings.SEARCH_PARALLEL_LEGS
            _runner = ThreadPoolExecutor(max_workers=_runner_threads, thread_name_prefix="search-legs")
        return _runner


def _with_connection(job, kwargs):
    close_old_connections()  # as at a request's start: drop a connection past its age or broken
    try:
        return job(**kwargs)
    finally:
        close_old_connections()
