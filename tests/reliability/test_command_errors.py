"""A command that cannot go on because of the database says so in one line, not a traceback
(memory_site/command_errors.py, used by manage.py): a server that is not there, a database that
was never migrated. Run as an operator runs them: `python manage.py ...` in a subprocess, against a
PostgreSQL of its own (tests/reliability/throwaway.py)."""

import psycopg
import pytest
from django.db import IntegrityError, OperationalError, ProgrammingError
from psycopg import errors as pg_errors

from memory_site.command_errors import operator_message
from tests.reliability.throwaway import ThrowawayPostgres, free_port, manage, project_env


@pytest.fixture(scope="module")
def pg(tmp_path_factory):
    server = ThrowawayPostgres(tmp_path_factory.mktemp("command-errors") / "pg")
    yield server
    server.stop()


def _wrapped(django_error, cause):
    error = django_error(str(cause))
    error.__cause__ = cause
    return error


def test_a_missing_table_asks_for_migrate():
    error = _wrapped(ProgrammingError, pg_errors.UndefinedTable('relation "lessons_team" does not exist'))
    message = operator_message(error, database_url_set=False)
    assert 'relation "lessons_team" does not exist' in message
    assert "python manage.py migrate" in message


def test_an_unreachable_server_names_where_to_look():
    error = OperationalError("connection failed: Connection refused\nIs the server running?")
    assert "DATABASE_URL" in operator_message(error, database_url_set=True)
    assert ".data/postgres" in operator_message(error, database_url_set=False)
    assert "Is the server running" not in operator_message(error, database_url_set=True)  # the first line only
    # a command that writes keeps its finished work; one that only reads has none to keep
    assert "Work committed before the error is kept" in operator_message(error, database_url_set=True,
                                                                          command="import_lessons")
    assert "committed" not in operator_message(error, database_url_set=True, command="search")


def test_the_embedded_servers_own_connection_error_is_explained_too():
    # raised by psycopg itself while the settings start the embedded server, before Django wraps it
    message = operator_message(psycopg.OperationalError("connection failed: no such file"), database_url_set=False)
    assert message.startswith("the database is unavailable (connection failed: no such file)")


@pytest.mark.parametrize("error", [
    _wrapped(ProgrammingError, pg_errors.SyntaxError("syntax error at or near")),
    IntegrityError("duplicate key value"),
    ValueError("not a database error"),
])
def test_errors_that_are_bugs_keep_their_traceback(error):
    assert operator_message(error, database_url_set=True) is None


def test_a_command_against_a_server_that_is_not_there_says_so_in_one_line():
    url = f"postgres://nobody:secret@127.0.0.1:{free_port()}/memory_store"
    result = manage("search", "--team", "demo", "retries", env=project_env(url), check=False, timeout=120)
    assert result.returncode == 1
    assert "Traceback" not in result.stderr
    assert "search: the database is unavailable (connection failed" in result.stderr
    assert "secret" not in result.stderr  # the password in DATABASE_URL is not repeated


def test_a_command_before_migrate_asks_for_migrate(pg):
    url = pg.create_database("never_migrated")
    result = manage("create_team", "platform", env=project_env(url), check=False, timeout=120)
    assert result.returncode == 1
    assert "Traceback" not in result.stderr
    assert "create_team: the database is not migrated" in result.stderr
    assert "run `python manage.py migrate` first" in result.stderr
    # --traceback keeps the traceback, for a developer
    result = manage("create_team", "platform", "--traceback", env=project_env(url), check=False, timeout=120)
    assert result.returncode == 1 and "Traceback" in result.stderr


def test_after_migrate_the_same_command_works(pg):
    url = pg.create_database("migrated_now")
    env = project_env(url)
    manage("migrate", "--no-input", env=env)
    result = manage("create_team", "platform", env=env, check=False, timeout=120)
    assert result.returncode == 0, result.stderr


@pytest.mark.parametrize("setting, value, words", [
    ("SEARCH_BM25_K1", "1x2", "SEARCH_BM25_K1: '1x2' is not a finite number"),
    ("SEARCH_HNSW_EF_SEARCH", "-5", "SEARCH_HNSW_EF_SEARCH: -5 is out of range; use 1 to 1000"),
    ("EMBEDDINGS_ENABLED", "flase", "EMBEDDINGS_ENABLED: 'flase' is not a switch"),
    ("LESSONS_LOG_LEVEL", "LOUD", "LESSONS_LOG_LEVEL: 'LOUD' is not one of DEBUG"),
    ("EMBEDDING_QUERY_RUNTIME", "gpu", "EMBEDDING_QUERY_RUNTIME: 'gpu' is not one of onnx, torch"),
    ("DATABASE_URL", "mysql://u:p@localhost/db", "DATABASE_URL: mysql:// is not PostgreSQL"),
    ("DATABASE_URL", "postgres://u:p@127.0.0.1:99999/db", "DATABASE_URL: cannot be read (Port out of range"),
    # was a psycopg traceback at the first connection
    ("DATABASE_URL", "postgres://u:p@127.0.0.1/db?connect_timeout=abc",
     "DATABASE_URL: ?connect_timeout='abc' is not a whole number"),
])
def test_a_setting_the_environment_got_wrong_is_one_line_naming_it(setting, value, words):
    url = f"postgres://nobody:secret@127.0.0.1:{free_port()}/memory_store"
    result = manage("search", "--team", "demo", "retries", env=project_env(url, **{setting: value}), check=False,
                    timeout=120)
    assert result.returncode == 1
    assert "Traceback" not in result.stderr
    assert f"search: a setting is wrong: {words}" in result.stderr


def test_an_embedded_data_folder_that_is_a_file_is_one_line(tmp_path):
    not_a_folder = tmp_path / "notes.txt"
    not_a_folder.write_text("a file")
    env = {key: value for key, value in project_env("").items() if key != "DATABASE_URL"}
    result = manage("purge_searches", "--dry-run", env={**env, "EMBEDDED_POSTGRES_DIR": str(not_a_folder)},
                    check=False, timeout=120)
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert f"EMBEDDED_POSTGRES_DIR: {not_a_folder} is a file; name a folder" in result.stderr
    # a file on the way was a FileExistsError traceback when the folder was made
    inside = not_a_folder / "pgdata"
    result = manage("purge_searches", "--dry-run", env={**env, "EMBEDDED_POSTGRES_DIR": str(inside)},
                    check=False, timeout=120)
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert f"EMBEDDED_POSTGRES_DIR: {inside} lies inside {not_a_folder}, which is a file" in result.stderr


def test_a_dry_run_backfill_against_no_server_says_the_database_is_unavailable():
    url = f"postgres://nobody:secret@127.0.0.1:{free_port()}/memory_store"
    result = manage("backfill_embeddings", "--dry-run", env=project_env(url), check=False, timeout=120)
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert "backfill_embeddings: the database is unavailable" in result.stderr
    assert "connection was lost" not in result.stderr  # it never had one


def test_an_argument_that_is_not_utf8_is_one_line_not_a_traceback(pg):
    """Bytes that are not UTF-8 (`--team $'\\xff'`, a query `$'retries \\xff'`) reach Python as lone
    surrogates, which psycopg cannot send: every command that looked them up ended in a traceback."""
    env = project_env(pg.create_database("not_utf8"))
    manage("migrate", "--no-input", env=env)
    for args in (("list_api_keys", "--team", "caf\udce9"),
                 ("create_api_key", "--team", "acme", "--name", "agent \udcff", "--create-team"),
                 ("search", "retries \udcff", "--team", "caf\udce9", "--mode", "text")):
        result = manage(*args, env=env, check=False, timeout=120)
        assert result.returncode == 1, result.stderr
        assert "Traceback" not in result.stderr
        assert f"{args[0]}: an argument (" in result.stderr and "is not UTF-8 text" in result.stderr
        assert any(shown in result.stderr for shown in ("('caf\\xe9')", "('agent \\xff')", "('retries \\xff')"))  # as they were
