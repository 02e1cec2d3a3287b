"""gunicorn's settings for `make serve` (production). Every value can be changed from the
environment: HOST, PORT, WEB_CONCURRENCY (worker processes), GUNICORN_THREADS, GUNICORN_TIMEOUT,
GUNICORN_MAX_REQUESTS.

Sized for a 2-core machine: 2 worker processes of 4 threads each. A search spends part of its
time in PostgreSQL and part in ONNX Runtime (which releases the GIL), so threads overlap well;
each process holds one copy of the model (~90 MB ONNX graph, no torch).
"""

import os
import subprocess
import sys

from django.core.exceptions import ImproperlyConfigured

from memory_site.env_values import whole_number

try:
    bind = f"{os.environ.get('HOST', '127.0.0.1')}:{whole_number('PORT', default=8000, low=1, high=65535)}"
    workers = whole_number("WEB_CONCURRENCY", default=2, low=1, high=256)
    threads = whole_number("GUNICORN_THREADS", default=4, low=1, high=1024)
    timeout = whole_number("GUNICORN_TIMEOUT", default=60, low=0)
    # A worker restarts after this many requests (with jitter) when set. Off by default: a gthread
    # worker's restart reset some requests under way (12 of 294 over 14 restarts, measured here;
    # benoitc/gunicorn#3038), and no memory growth has been measured that would need it.
    max_requests = whole_number("GUNICORN_MAX_REQUESTS", default=0, low=0)
except ImproperlyConfigured as error:  # one line naming the variable, not gunicorn's traceback
    sys.exit(f"gunicorn.conf.py: a setting is wrong: {error}")

worker_class = "gthread"
graceful_timeout = 30
keepalive = 5
max_requests_jitter = max_requests // 10
accesslog = "-"
errorlog = "-"
# The access log with each request's duration in milliseconds (%(M)s) at the end.
access_log_format = '%(h)s %(l)s %(u)s %(t)s "%(r)s" %(s)s %(b)s "%(f)s" "%(a)s" %(M)sms'
proc_name = "memory-store"
wsgi_app = "memory_site.wsgi:application"


def on_starting(server):
    """Check the Django settings once, before any worker boots: a bad one is one line and exit
    status 2, instead of a traceback in every worker and gunicorn's own while it halts."""
    check = subprocess.run([sys.executable, "-m", "memory_site.settings_check"], check=False)
    if check.returncode != 0:
        sys.exit(check.returncode)


def post_worker_init(worker):
    """Load the query encoder in this worker before it accepts its first connection, so no
    request waits for the model (a request arriving meanwhile queues on the shared socket)."""
    from django.conf import settings

    if not settings.EMBEDDING_WARM_UP:  # the model then loads at the first search that needs it
        worker.log.info("worker %s: taking traffic (EMBEDDING_WARM_UP=0: the model loads later)", worker.pid)
        return
    from lessons.embedding import warm_up

    warm_up()
    worker.log.info("worker %s: embedding model loaded, taking traffic", worker.pid)


if __name__ == "__main__":
    # `python gunicorn.conf.py` (make serve) checks the values above before gunicorn reads them:
    # gunicorn itself parses WEB_CONCURRENCY with int() and answers `abc` with a traceback.
    print(f"gunicorn: {workers} worker(s) x {threads} thread(s) on {bind}")
