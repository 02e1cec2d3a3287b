"""`python manage.py db_worker`: django-tasks-db's worker, which also outlives a database restart.

The library's loop lets a lost connection escape while it waits for work: a worker idle through a
database restart (or a failover) exited at its next poll, "the database is unavailable", and no
task ran until something restarted it. Here an idle worker says so in one line, waits (1 s,
doubling to 30 s) and polls again once the database answers. A worker whose connection is lost
while it runs a task still exits (the library could not record the task's end; the task stays
RUNNING for `requeue_stalled_tasks`), and so does `--batch`, which a scheduler re-runs. A database
unreachable at the start is still refused at once: a wrong DATABASE_URL is not a restart.
"""

import os
import time

from django.db import InterfaceError, OperationalError, connections
from django.utils.autoreload import DJANGO_AUTORELOAD_ENV, run_with_reloader
from django_tasks_db.management.commands import db_worker as library
from django_tasks_db.models import DBTaskResult

from lessons.error_text import first_line

FIRST_WAIT_SECONDS = 1.0
MAX_WAIT_SECONDS = 30.0
CONNECTION_LOST = (OperationalError, InterfaceError)

logger = library.logger  # the worker's own lines, in its stream and at its verbosity


class ReconnectingWorker(library.Worker):
    def __init__(self, **options):
        super().__init__(**options)
        self.task_under_way = False

    def run(self) -> None:
        connections[DBTaskResult.objects.db].ensure_connection()  # unreachable at the start: refused, as before
        while True:
            try:
                return super().run()
            except CONNECTION_LOST as error:
                if self.task_under_way or self.batch or not self.running:
                    raise
                self._wait_for_the_database(error)
                self.startup_delay = False  # a resumed loop skips the library's start-up pause

    def run_task(self, db_task_result: DBTaskResult) -> None:
        self.task_under_way = True
        super().run_task(db_task_result)  # it records the task's own errors; one escaping it is the database's
        self.task_under_way = False

    def _wait_for_the_database(self, error: Exception) -> None:
        """Sleep and reconnect until the database answers. A stop signal ends the sleep: the
        library's handler exits at once when no task runs."""
        wait, lost_at = FIRST_WAIT_SECONDS, time.monotonic()
        logger.warning("database connection lost while waiting for tasks (%s); reconnecting in %g s",
                       first_line(error), wait)
        while True:
            connections.close_all()  # the broken connection; the check below opens a new one
            time.sleep(wait)
            try:
                connections[DBTaskResult.objects.db].ensure_connection()
            except CONNECTION_LOST as still:
                wait = min(wait * 2, MAX_WAIT_SECONDS)
                logger.warning("database still unavailable (%s); reconnecting in %g s", first_line(still), wait)
            else:
                logger.info("database connection back after %.0f s; polling for tasks again",
                               time.monotonic() - lost_at)
                return


class Command(library.Command):
    def handle(self, *, verbosity, queue_name, interval, batch, backend_name, startup_delay, reload, max_tasks,
               worker_id, **options) -> None:
        # The library's handle(), with this worker: it names its Worker class inline.
        self.configure_logging(verbosity)
        if reload and batch:
            logger.warning("Warning: --reload and --batch cannot be specified together. Disabling autoreload.")
            reload = False
        worker = ReconnectingWorker(
            queue_names=queue_name.split(","), interval=interval, batch=batch, backend_name=backend_name,
            startup_delay=startup_delay, max_tasks=max_tasks, worker_id=worker_id,
        )
        if not reload:
            worker.configure_signals()
            worker.run()
            return
        if os.environ.get(DJANGO_AUTORELOAD_ENV) == "true":
            worker.configure_signals()  # only the reloader's child handles the signals
        run_with_reloader(worker.run)
