"""Numbers and switches read from the environment, checked: a bad value stops start-up with one
line naming the variable, never a silent misreading.

django-environ's own readers are lenient in ways an operator does not expect: `env.float` drops
every character that is not a digit, so `SEARCH_BM25_K1=1x2` reads 12.0 and `abc` fails deep in
Python without naming the variable; `env.bool` reads any unknown word (`ture`, `flase`) as off.
"""

import math
import os

from django.core.exceptions import ImproperlyConfigured

_TRUE = {"1", "true", "yes", "on", "y", "t"}
_FALSE = {"0", "false", "no", "off", "n", "f"}


def _raw(name: str) -> str | None:
    value = os.environ.get(name)
    return None if value is None else value.strip()


def flag(name: str, *, default: bool) -> bool:
    """A switch: 1/0, true/false, yes/no, on/off (any case); unset or empty: default."""
    raw = _raw(name)
    if not raw:
        return default
    if raw.lower() in _TRUE:
        return True
    if raw.lower() in _FALSE:
        return False
    raise ImproperlyConfigured(f"{name}: {raw!r} is not a switch; use 1 or 0 (true/false, yes/no, on/off)")


def _bounded(name: str, value: float, low: float | None, high: float | None, above: float | None = None) -> None:
    if above is not None and value <= above:
        raise ImproperlyConfigured(f"{name}: {value:g} is out of range; use more than {above:g}")
    if (low is not None and value < low) or (high is not None and value > high):
        span = f"{low:g} to {high:g}" if low is not None and high is not None else (
            f"at least {low:g}" if low is not None else f"at most {high:g}")
        raise ImproperlyConfigured(f"{name}: {value:g} is out of range; use {span}")


def whole_number(name: str, *, default: int, low: int | None = None, high: int | None = None) -> int:
    """An integer written in digits (an optional sign), within [low, high]; unset or empty: default."""
    raw = _raw(name)
    if not raw:
        return default
    digits = raw[1:] if raw[:1] in "+-" else raw
    if not (digits.isascii() and digits.isdigit()):
        raise ImproperlyConfigured(f"{name}: {raw!r} is not a whole number")
    value = int(raw)
    _bounded(name, value, low, high)
    return value


def number(
    name: str, *, default: float, low: float | None = None, high: float | None = None, above: float | None = None
) -> float:
    """A finite decimal number (1.5, 2e-3) within [low, high] (and more than `above`); unset or
    empty: default."""
    raw = _raw(name)
    if not raw:
        return default
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or "_" in raw:
        raise ImproperlyConfigured(f"{name}: {raw!r} is not a finite number")
    _bounded(name, value, low, high, above)
    return value


def choice(name: str, *, default: str, choices: tuple[str, ...], upper: bool = False) -> str:
    """One of `choices` (compared in lowercase, or uppercase with `upper`: log levels); unset or
    empty: default."""
    raw = _raw(name)
    if not raw:
        return default
    value = raw.upper() if upper else raw.lower()
    if value not in choices:
        raise ImproperlyConfigured(f"{name}: {raw!r} is not one of {', '.join(choices)}")
    return value


POSTGRES_SCHEMES = ("postgres", "postgresql", "pgsql", "postgis")


def database_from_url(url: str) -> dict:
    """DATABASE_URL as a Django DATABASES entry (django-environ reads it), refused in one line when
    it cannot work: another database than PostgreSQL (its driver's import then aborted the process),
    a port out of range (a ValueError deep in urllib), an option after `?` that is unknown or
    badly written (`_database_url_options`)."""
    import environ

    scheme = url.split("://", 1)[0].lower() if "://" in url else ""
    if scheme not in POSTGRES_SCHEMES:
        raise ImproperlyConfigured(
            f"DATABASE_URL: {scheme + '://' if scheme else 'no scheme'} is not PostgreSQL; this store needs "
            "PostgreSQL with pgvector: postgres://USER:PASSWORD@HOST:PORT/NAME"
        )
    try:
        config = environ.Env.db_url_config(url)
    except (ValueError, KeyError) as error:
        raise ImproperlyConfigured(f"DATABASE_URL: cannot be read ({error})") from error
    settings_part, options = _database_url_options(url)
    config.update(settings_part)
    if options:
        config["OPTIONS"] = {**config.get("OPTIONS", {}), **options}
    return config


# What django-environ passes through from DATABASE_URL's query string, unchecked: every option
# but five goes to the driver as a connection keyword, so an unknown one (`?foo=1`) or a bad
# number (`?connect_timeout=abc`) was a traceback at the first connection, a bad choice
# (`?sslmode=bogus`) read as "the database is unavailable", and `?disable_server_side_cursors=false`
# was the string "false", which is true. The values libpq itself checks only when it connects:
_LIBPQ_CHOICES = {
    "sslmode": ("disable", "allow", "prefer", "require", "verify-ca", "verify-full"),
    "sslnegotiation": ("postgres", "direct"),
    "sslcertmode": ("disable", "allow", "require"),
    "gssencmode": ("disable", "prefer", "require"),
    "gsslib": ("gssapi", "sspi"),
    "channel_binding": ("disable", "prefer", "require"),
    "target_session_attrs": ("any", "read-write", "read-only", "primary", "standby", "prefer-standby"),
    "load_balance_hosts": ("disable", "random"),
    "ssl_min_protocol_version": ("TLSv1", "TLSv1.1", "TLSv1.2", "TLSv1.3"),
    "ssl_max_protocol_version": ("TLSv1", "TLSv1.1", "TLSv1.2", "TLSv1.3"),
    "min_protocol_version": ("3.0", "3.2", "latest"),
    "max_protocol_version": ("3.0", "3.2", "latest"),
    "sslcompression": ("0", "1"),
    "sslsni": ("0", "1"),
    "gssdelegation": ("0", "1"),
    "keepalives": ("0", "1"),
}
_LIBPQ_WHOLE_NUMBERS = {"connect_timeout", "keepalives_idle", "keepalives_interval", "keepalives_count",
                        "tcp_user_timeout"}
# Options Django reads itself (the rest of OPTIONS goes to psycopg.connect).
_DJANGO_SWITCHES = {"atomic_requests": "ATOMIC_REQUESTS", "disable_server_side_cursors": "DISABLE_SERVER_SIDE_CURSORS"}
# Set elsewhere: a value in the URL was silently replaced (CONN_MAX_AGE, CONN_HEALTH_CHECKS) or
# cannot work here (Django's pool needs CONN_MAX_AGE 0 and the psycopg_pool package).
_NOT_IN_THE_URL = {
    "conn_max_age": "set DATABASE_CONN_MAX_AGE instead",
    "conn_health_checks": "it is always on",
    "autocommit": "the store's writes rely on Django's autocommit",
    "client_encoding": "Django always connects in UTF8",
    "pool": "Django's connection pool is not supported; kept connections are (DATABASE_CONN_MAX_AGE)",
}


def _database_url_options(url: str) -> tuple[dict, dict]:
    """DATABASE_URL's query options, checked: (Django settings, driver OPTIONS) to lay over
    django-environ's reading. An unknown option's value is never shown (it may be a misspelt
    password option)."""
    from urllib.parse import parse_qs, urlsplit

    import psycopg

    query = urlsplit(url).query
    if not query:
        return {}, {}
    libpq_keywords = {option.keyword.decode() for option in psycopg.pq.Conninfo.get_defaults()}
    settings_part, options = {}, {}
    for key, values in parse_qs(query, keep_blank_values=True).items():
        name, value = f"DATABASE_URL: ?{key}", values[0]
        written = f"{name}={value!r}"
        if len(values) > 1:
            raise ImproperlyConfigured(f"{name} is given {len(values)} times; give it once")
        if not value.strip():
            raise ImproperlyConfigured(f"{name} has no value")
        if key.lower() in _NOT_IN_THE_URL:
            raise ImproperlyConfigured(f"{name} is not taken from the URL: {_NOT_IN_THE_URL[key.lower()]}")
        if key.lower() in _DJANGO_SWITCHES:
            if value.strip().lower() not in _TRUE | _FALSE:
                raise ImproperlyConfigured(f"{written} is not a switch; use 1 or 0 (true/false)")
            settings_part[_DJANGO_SWITCHES[key.lower()]] = value.strip().lower() in _TRUE
        elif key == "isolation_level":
            levels = {level.name.lower(): level for level in psycopg.IsolationLevel}
            level = levels.get(value.strip().lower().replace(" ", "_"))
            if level is None:
                raise ImproperlyConfigured(f"{written} is not one of {', '.join(levels)}")
            options[key] = level
        elif key in _LIBPQ_CHOICES:
            if value not in _LIBPQ_CHOICES[key]:
                raise ImproperlyConfigured(f"{written} is not one of {', '.join(_LIBPQ_CHOICES[key])}")
        elif key in _LIBPQ_WHOLE_NUMBERS or key == "port":  # port: one per host, comma-separated
            if not all(part.isascii() and part.isdigit() for part in value.split(",")):
                raise ImproperlyConfigured(f"{written} is not a whole number")
        elif key not in libpq_keywords:
            raise ImproperlyConfigured(
                f"{name} is not a connection option; use PostgreSQL's (libpq's: sslmode, connect_timeout, "
                "application_name, options, ...) or atomic_requests, disable_server_side_cursors, isolation_level"
            )
    return settings_part, options
