"""The curators' admin, one module per model. Saves go through the same services as the API and
the imports."""

from lessons.admin import lessons, memories, teams  # noqa: F401  (registers the admin classes)
from lessons.admin import api_keys  # noqa: F401  (API keys: created and revoked here)
from lessons.admin import usage  # noqa: F401  (recorded searches and their feedback)
from lessons.admin import dismissals  # noqa: F401  ("not a duplicate" marks, to take one back)
