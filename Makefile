# Two commands on a fresh machine: `make run` (serve at http://127.0.0.1:8000) and `make test`.
VENV ?= .venv
PYTHON ?= python3
PY := $(VENV)/bin/python
export DJANGO_DEBUG ?= 1

.PHONY: run test install bootstrap clean-data

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

install: $(VENV)/.installed $(CHROMIUM)

bootstrap: install
	$(PY) manage.py bootstrap

run: bootstrap
	$(PY) manage.py runserver 127.0.0.1:8000

test: install
	$(PY) -m pytest

clean-data:
	rm -rf .data
