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
    a port out of range (a ValueError deep in urllib)."""
    import environ

    scheme = url.split("://", 1)[0].lower() if "://" in url else ""
    if scheme not in POSTGRES_SCHEMES:
        raise ImproperlyConfigured(
            f"DATABASE_URL: {scheme + '://' if scheme else 'no scheme'} is not PostgreSQL; this store needs "
            "PostgreSQL with pgvector: postgres://USER:PASSWORD@HOST:PORT/NAME"
        )
    try:
        return environ.Env.db_url_config(url)
    except (ValueError, KeyError) as error:
        raise ImproperlyConfigured(f"DATABASE_URL: cannot be read ({error})") from error
