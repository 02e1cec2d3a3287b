# Two commands on a fresh machine: `make run` (serve at http://127.0.0.1:8000) and `make test`.
# `make serve` runs the production server (gunicorn, DEBUG off); see README, Production.
VENV ?= .venv
PYTHON ?= python3
PY := $(VENV)/bin/python
HOST ?= 127.0.0.1
PORT ?= 8000
export HOST PORT

.PHONY: run serve worker test install bootstrap clean-data

# The browser tests (tests/browser/) drive Debian's chromium through Playwright: Playwright's own
# browser download (`playwright install`) cannot be fetched here, Debian's package can.
CHROMIUM := /usr/bin/chromium

$(CHROMIUM):
	apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y chromium

$(VENV)/.installed: requirements.txt
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -r requirements.txt
	touch $@

install: $(VENV)/.installed

# The model is exported to ONNX and verified against torch once, here: searches never load torch.
.data/onnx/.exported: $(VENV)/.installed
	DJANGO_DEBUG=$${DJANGO_DEBUG:-1} $(PY) manage.py export_onnx
	mkdir -p $(@D) && touch $@

install: .data/onnx/.exported

.env:
	$(PY) -m memory_site.dev_env

bootstrap: install .env
	$(PY) manage.py bootstrap

run: bootstrap
	$(PY) manage.py runserver $(HOST):$(PORT)

# Production: DEBUG off, settings from the environment (DJANGO_SECRET_KEY, DJANGO_ALLOWED_HOSTS,
# DATABASE_URL, ...). The TLS proxy in front redirects plain HTTP unless DJANGO_SECURE_SSL_REDIRECT=1.
serve: export DJANGO_DEBUG = 0
serve: export DJANGO_SECURE_SSL_REDIRECT ?= 0
serve: install
	$(PY) gunicorn.conf.py
	$(PY) manage.py migrate --no-input
	$(VENV)/bin/gunicorn --config gunicorn.conf.py

# Production's task worker (embeds rows after their save), next to `make serve`.
worker: export DJANGO_DEBUG = 0
worker: install
	$(PY) manage.py db_worker

# Only the tests need a browser: a production host running `make serve` never installs one.
test: install $(CHROMIUM)
	DJANGO_DEBUG=1 $(PY) -m pytest

clean-data:
	rm -rf .data
