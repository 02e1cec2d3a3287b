"""`python -m memory_site.settings_check`: read the settings once and say in one line what is
wrong, exit status 2; silent and 0 when they load.

gunicorn runs it in its master before any worker boots (gunicorn.conf.py, `on_starting`): a bad
setting used to surface in every worker as a traceback, then as gunicorn's own traceback while it
halted. The check connects to nothing: without DATABASE_URL it names a placeholder server, so
the embedded PostgreSQL is not started for it."""

import os
import sys

from django.core.exceptions import ImproperlyConfigured

PLACEHOLDER_DATABASE_URL = "postgres://settings-check.invalid/none"


def main() -> int:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "memory_site.settings")
    if not os.environ.get("DATABASE_URL"):
        os.environ["DATABASE_URL"] = PLACEHOLDER_DATABASE_URL
    from django.conf import settings

    try:
        settings.INSTALLED_APPS  # noqa: B018 - reading one setting loads them all
        _task_backend_resolves()
        _embedding_backend_resolves()
    except ImproperlyConfigured as error:
        from memory_site.command_errors import operator_message

        print(f"memory-store: {operator_message(error, database_url_set=True)}", file=sys.stderr)
        return 2
    return 0


def _task_backend_resolves() -> None:
    """TASKS_BACKEND is only imported at a worker's first save, after its commit: a backend that
    cannot be imported passed this check, and every write then answered 500 for a row it had stored."""
    import django
    from django_tasks import task_backends

    django.setup()
    task_backends["default"]  # noqa: B018 - raises InvalidTaskBackendError (ImproperlyConfigured)


def _embedding_backend_resolves() -> None:
    """EMBEDDING_BACKEND is imported when a worker warms up or at the first search: a name that
    cannot be imported passed this check, and each worker printed a traceback before gunicorn
    halted (with EMBEDDING_WARM_UP=0 it served, and every hybrid search answered 500). Building the
    backend loads no model."""
    from lessons.embedding import get_embedding_backend

    get_embedding_backend()


if __name__ == "__main__":
    sys.exit(main())
