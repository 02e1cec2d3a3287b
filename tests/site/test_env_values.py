"""Settings read from the environment are checked: a bad value names its variable, never a silent
misreading (django-environ reads `1x2` as 12.0 and `flase` as off)."""

import pytest
from django.core.exceptions import ImproperlyConfigured

from memory_site.env_values import choice, database_from_url, flag, number, whole_number


@pytest.mark.parametrize("raw, expected", [
    (None, 0.3), ("", 0.3), ("  ", 0.3), ("0.75", 0.75), (" 1 ", 1.0), ("2e-1", 0.2), ("-0.5", -0.5),
])
def test_a_number_is_read_as_written_and_unset_or_blank_is_the_default(monkeypatch, raw, expected):
    if raw is None:
        monkeypatch.delenv("X_NUMBER", raising=False)
    else:
        monkeypatch.setenv("X_NUMBER", raw)
    assert number("X_NUMBER", default=0.3) == expected


@pytest.mark.parametrize("raw", ["abc", "1x2", "1,5", "nan", "inf", "-Infinity", "1_0"])
def test_a_number_that_is_not_one_is_refused_by_name(monkeypatch, raw):
    monkeypatch.setenv("X_NUMBER", raw)
    with pytest.raises(ImproperlyConfigured, match=rf"^X_NUMBER: '{raw}' is not a finite number$"):
        number("X_NUMBER", default=0.3)


@pytest.mark.parametrize("raw, expected", [("12", 12), ("+3", 3), ("-2", -2), ("", 7)])
def test_a_whole_number_is_digits_with_an_optional_sign(monkeypatch, raw, expected):
    monkeypatch.setenv("X_WHOLE", raw)
    assert whole_number("X_WHOLE", default=7) == expected


@pytest.mark.parametrize("raw", ["1.0", "1e3", "x", "1_000", "١٢"])
def test_a_whole_number_written_otherwise_is_refused(monkeypatch, raw):
    monkeypatch.setenv("X_WHOLE", raw)
    with pytest.raises(ImproperlyConfigured, match=r"^X_WHOLE: .* is not a whole number$"):
        whole_number("X_WHOLE", default=7)


@pytest.mark.parametrize("reader, raw, bounds, message", [
    (whole_number, "0", {"low": 1, "high": 1000}, "X: 0 is out of range; use 1 to 1000"),
    (whole_number, "1001", {"low": 1, "high": 1000}, "X: 1001 is out of range; use 1 to 1000"),
    (whole_number, "-1", {"low": 0}, "X: -1 is out of range; use at least 0"),
    (number, "1.5", {"low": 0, "high": 1}, "X: 1.5 is out of range; use 0 to 1"),
    (number, "0", {"above": 0}, "X: 0 is out of range; use more than 0"),
])
def test_a_value_out_of_its_range_says_the_range(monkeypatch, reader, raw, bounds, message):
    monkeypatch.setenv("X", raw)
    with pytest.raises(ImproperlyConfigured, match=f"^{message}$"):
        reader("X", default=1, **bounds)


def test_the_bounds_themselves_are_allowed(monkeypatch):
    monkeypatch.setenv("X", "1")
    assert number("X", default=0.5, low=0, high=1) == 1.0
    assert whole_number("X", default=5, low=1, high=1) == 1


@pytest.mark.parametrize("raw, expected", [
    ("1", True), ("true", True), ("Yes", True), ("ON", True), ("0", False), ("false", False), ("off", False),
    ("no", False), ("", True),
])
def test_a_switch_takes_the_usual_words_in_any_case(monkeypatch, raw, expected):
    monkeypatch.setenv("X_FLAG", raw)
    assert flag("X_FLAG", default=True) is expected


@pytest.mark.parametrize("raw", ["flase", "ture", "2", "enabled"])
def test_a_switch_misspelt_is_refused_not_read_as_off(monkeypatch, raw):
    monkeypatch.setenv("X_FLAG", raw)
    with pytest.raises(ImproperlyConfigured, match=rf"^X_FLAG: '{raw}' is not a switch"):
        flag("X_FLAG", default=True)


def test_a_choice_is_compared_without_case_and_anything_else_is_refused(monkeypatch):
    monkeypatch.setenv("X_LEVEL", "debug")
    assert choice("X_LEVEL", default="INFO", choices=("DEBUG", "INFO"), upper=True) == "DEBUG"
    monkeypatch.setenv("X_LEVEL", "LOUD")
    with pytest.raises(ImproperlyConfigured, match=r"^X_LEVEL: 'LOUD' is not one of DEBUG, INFO$"):
        choice("X_LEVEL", default="INFO", choices=("DEBUG", "INFO"), upper=True)
    monkeypatch.setenv("X_RUNTIME", "gpu")
    with pytest.raises(ImproperlyConfigured, match=r"^X_RUNTIME: 'gpu' is not one of onnx, torch$"):
        choice("X_RUNTIME", default="onnx", choices=("onnx", "torch"))


@pytest.mark.parametrize("url, message", [
    ("mysql://u:p@localhost/db", "DATABASE_URL: mysql:// is not PostgreSQL"),  # its driver's import aborted
    ("localhost/db", "DATABASE_URL: no scheme is not PostgreSQL"),
    ("postgres://u:p@127.0.0.1:99999/db", r"DATABASE_URL: cannot be read \(Port out of range"),
])
def test_a_database_url_that_cannot_work_is_refused_in_one_line(url, message):
    with pytest.raises(ImproperlyConfigured, match=message):
        database_from_url(url)


def test_a_postgres_url_reads_as_django_needs_it():
    config = database_from_url("postgres://bob:s3cret@db.example:6543/memory")
    assert (config["ENGINE"], config["NAME"], config["USER"], config["HOST"], config["PORT"]) == (
        "django.db.backends.postgresql", "memory", "bob", "db.example", 6543)


@pytest.mark.parametrize("query, message", [
    # libpq checked these only when connecting: a traceback, or "the database is unavailable"
    ("sslmode=bogus", r"^DATABASE_URL: \?sslmode='bogus' is not one of disable, allow, prefer, require, verify-ca"),
    ("connect_timeout=abc", r"^DATABASE_URL: \?connect_timeout='abc' is not a whole number$"),
    ("foo=1", r"^DATABASE_URL: \?foo is not a connection option; use PostgreSQL's"),
    ("target_session_attrs=writable", r"^DATABASE_URL: \?target_session_attrs='writable' is not one of any"),
    ("sslmode=", r"^DATABASE_URL: \?sslmode has no value$"),
    ("sslmode=require&sslmode=disable", r"^DATABASE_URL: \?sslmode is given 2 times; give it once$"),
    # silently replaced by DATABASE_CONN_MAX_AGE, or read as the string "false", which is true
    ("conn_max_age=600", r"^DATABASE_URL: \?conn_max_age is not taken from the URL: set DATABASE_CONN_MAX_AGE"),
    ("disable_server_side_cursors=flase", r"^DATABASE_URL: \?disable_server_side_cursors='flase' is not a switch"),
    ("isolation_level=snapshot", r"^DATABASE_URL: \?isolation_level='snapshot' is not one of read_uncommitted"),
])
def test_a_database_url_option_that_cannot_work_is_refused_by_name(query, message):
    with pytest.raises(ImproperlyConfigured, match=message):
        database_from_url(f"postgres://u:secret@db.example/memory?{query}")


def test_an_unknown_database_url_option_never_shows_its_value():
    with pytest.raises(ImproperlyConfigured) as refused:
        database_from_url("postgres://u@db.example/memory?pasword=hunter2")  # a misspelt password option
    assert "hunter2" not in str(refused.value)


def test_the_options_a_database_url_may_carry_reach_django_and_the_driver(django_db_blocker):
    """The driver's own keywords, Django's switches read as switches (not the string "false"), an
    isolation level by name, and the connection works with them all."""
    from django.db import connection
    from django.db.backends.postgresql.base import DatabaseWrapper

    own = connection.settings_dict
    config = database_from_url(
        f"postgres://{own['USER']}@/{own['NAME']}?host={own['HOST']}&port={own['PORT']}&sslmode=disable"
        "&connect_timeout=5&application_name=ops-check&disable_server_side_cursors=false"
        "&isolation_level=repeatable%20read"
    )
    assert config["DISABLE_SERVER_SIDE_CURSORS"] is False
    assert config["OPTIONS"]["connect_timeout"] == 5
    config.update(TIME_ZONE=None, CONN_MAX_AGE=0, CONN_HEALTH_CHECKS=False, AUTOCOMMIT=True, ATOMIC_REQUESTS=False)
    with django_db_blocker.unblock():
        wrapper = DatabaseWrapper(config)
        try:
            wrapper.ensure_connection()
            wrapper.set_autocommit(False)  # the isolation level is the transaction's
            with wrapper.cursor() as cursor:
                cursor.execute("SELECT current_setting('application_name'), current_setting('transaction_isolation')")
                assert cursor.fetchone() == ("ops-check", "repeatable read")
        finally:
            wrapper.rollback()
            wrapper.close()
