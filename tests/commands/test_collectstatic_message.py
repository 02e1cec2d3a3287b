"""`collectstatic` (lessons/management/commands/collectstatic.py) with nowhere to copy to names the
variable an operator sets, DJANGO_STATIC_ROOT; Django's own refusal named its STATIC_ROOT setting,
which nobody edits here. Run as an operator runs it: a subprocess, with DEBUG off."""

import sys

import pytest

from tests.site.test_production_server import production_env, run

# collectstatic never opens the database: a server that is not there proves it (and leaves the
# embedded one alone).
NO_DATABASE = "postgres://nobody@127.0.0.1:1/nothing"


def collectstatic(**overrides: str):
    env = production_env(DATABASE_URL=NO_DATABASE, **overrides)  # DJANGO_* of this shell left out
    return run([sys.executable, "manage.py", "collectstatic", "--no-input"], env)


@pytest.mark.parametrize("overrides", [{}, {"DJANGO_STATIC_ROOT": ""}, {"DJANGO_DEBUG": "1"}],
                         ids=["unset", "blank", "debug_on"])
def test_collectstatic_without_a_static_root_names_the_variable_in_one_line(overrides):
    result = collectstatic(**overrides)
    assert result.returncode == 1, result.stdout + result.stderr
    assert result.stderr == (
        "CommandError: collectstatic needs DJANGO_STATIC_ROOT: set it to the directory to copy static files into "
        "(only for a proxy that serves them; WhiteNoise serves them without it)\n"
    )
    assert "STATIC_ROOT setting" not in result.stdout + result.stderr


def test_collectstatic_with_a_static_root_copies_the_apps_files_there(tmp_path):
    target = tmp_path / "static"
    result = collectstatic(DJANGO_STATIC_ROOT=str(target))
    assert result.returncode == 0, result.stderr
    assert f"static files copied to '{target}'" in result.stdout
    assert (target / "admin" / "css" / "base.css").is_file()  # Django's admin
    assert any((target / "ninja").iterdir())  # the API docs' Swagger UI
    assert any((target / "lessons").iterdir())  # the curation console's own
