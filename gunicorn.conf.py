"""gunicorn's settings for `make serve` (production). Every value can be changed from the
environment: HOST, PORT, WEB_CONCURRENCY (worker processes), GUNICORN_THREADS, GUNICORN_TIMEOUT.

Sized for a 2-core machine: 2 worker processes of 4 threads each. A search spends part of its
time in PostgreSQL and part in ONNX Runtime (which releases the GIL), so threads overlap well;
each process holds one copy of the model (~90 MB ONNX graph, no torch).
"""

import os

from memory_site.env_values import whole_number

bind = f"{os.environ.get('HOST', '127.0.0.1')}:{whole_number('PORT', default=8000, low=1, high=65535)}"
workers = whole_number("WEB_CONCURRENCY", default=2, low=1, high=256)
worker_class = "gthread"
threads = whole_number("GUNICORN_THREADS", default=4, low=1, high=1024)
timeout = whole_number("GUNICORN_TIMEOUT", default=60, low=0)
graceful_timeout = 30
keepalive = 5
# A worker restarts after this many requests (with jitter): bounds slow memory growth.
max_requests = 5000
max_requests_jitter = 500
accesslog = "-"
errorlog = "-"
proc_name = "memory-store"
wsgi_app = "memory_site.wsgi:application"


def post_worker_init(worker):
    """Load the query encoder in this worker before it accepts its first connection, so no
    request waits for the model (a request arriving meanwhile queues on the shared socket)."""
    from lessons.embedding import warm_up

    warm_up()
    worker.log.info("worker %s: embedding model loaded, taking traffic", worker.pid)
