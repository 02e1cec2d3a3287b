"""`python -m memory_site.dev_env`: write a development `.env` if there is none (`make run` does).

Every command then works in a new shell with the venv activated, as `make` runs it: DEBUG on,
a secret generated for this checkout, local hosts. An existing `.env` is never touched.
"""

import secrets
import sys
from pathlib import Path

ENV_FILE = Path(__file__).resolve().parent.parent / ".env"

TEMPLATE = """\
# Written by `make run` for development on this machine (see .env.example for every setting).
# Production: do not copy this file; set DJANGO_DEBUG=0 and a secret of your own (README, Production).
DJANGO_DEBUG=1
DJANGO_SECRET_KEY={secret}
DJANGO_ALLOWED_HOSTS=127.0.0.1,localhost
"""


def write_development_env(path: Path = ENV_FILE) -> bool:
    """True when it wrote the file; False when one was already there."""
    if path.exists():
        return False
    path.write_text(TEMPLATE.format(secret=secrets.token_urlsafe(50)))
    path.chmod(0o600)  # it holds a secret
    return True


if __name__ == "__main__":
    if write_development_env():
        print(f"Wrote a development {ENV_FILE.name} (DEBUG on, a generated secret): commands now work in any "
              "shell with the venv activated (. .venv/bin/activate).")
    sys.exit(0)
