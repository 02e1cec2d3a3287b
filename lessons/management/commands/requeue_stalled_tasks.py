"""`python manage.py requeue_stalled_tasks [--older-than MINUTES] [--dry-run]`: tasks a dead
`db_worker` left RUNNING go back to READY for the next worker (lessons/services/task_queue.py says
why that is safe). Run it after a worker was killed, or from cron."""

from datetime import timedelta

from django.core.management.base import BaseCommand, CommandError

from lessons.services.task_queue import DATABASE_BACKEND, task_queue_is_database, task_results_requeue_stalled

DEFAULT_MINUTES = 30.0


MAX_MINUTES = 525_600  # a task running for a year is stalled by any measure


class Command(BaseCommand):
    help = "Put tasks RUNNING for longer than --older-than minutes (a dead worker's) back in the queue."

    def add_arguments(self, parser):
        parser.add_argument(
            "--older-than", type=float, default=DEFAULT_MINUTES, metavar="MINUTES",
            help=f"minutes since a worker claimed the task (default {DEFAULT_MINUTES:g}: far longer than any "
            "task of this project takes; 0 requeues every RUNNING task, live workers' included)",
        )
        parser.add_argument("--dry-run", action="store_true", help="list them, change nothing")

    def handle(self, *args, older_than, dry_run, **options):
        if not 0 <= older_than <= MAX_MINUTES:  # also refuses nan
            raise CommandError(f"--older-than: minutes must be 0 to {MAX_MINUTES:,} (a year), not {older_than}")
        if not task_queue_is_database():  # development: nothing to do is not a failure
            self.stdout.write(
                f"tasks do not go through the database queue here (TASKS_BACKEND is not {DATABASE_BACKEND}): "
                "they run at once, so none can be stalled"
            )
            return
        found = task_results_requeue_stalled(older_than=timedelta(minutes=older_than), dry_run=dry_run)
        for task in found:
            self.stdout.write(
                f"{task['id']}  {task['task_path']}  running since {task['started_at']:%Y-%m-%d %H:%M:%S %Z}"
                f"  worker {', '.join(task['worker_ids']) or '?'}"
            )
        verb = "would requeue" if dry_run else "requeued"
        self.stdout.write(f"{verb} {len(found)} task(s) running for more than {older_than:g} minutes")
