import os
import sys

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.core.wsgi import get_wsgi_application
from django.urls import get_resolver

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "memory_site.settings")
try:
    application = get_wsgi_application()
except ImproperlyConfigured as error:
    # One line naming the variable instead of a traceback per worker; gunicorn stops when a worker
    # exits with 3 ("Worker failed to boot"), rather than restarting it forever.
    from memory_site.command_errors import operator_message

    print(f"memory-store: {operator_message(error, database_url_set=True)}", file=sys.stderr, flush=True)
    sys.exit(3)
# The URLconf (the API, and the admin modules it discovers) loads now rather than in the first
# request.
get_resolver().url_patterns  # noqa: B018

# The model loads lazily; a server starts loading it at once (runserver serves through this
# module too), so the first search does not wait for it. EMBEDDING_WARM_UP=0 turns that off.
if settings.EMBEDDING_WARM_UP:
    from lessons.embedding import warm_up_in_background

    warm_up_in_background()
