import json
import os
import subprocess
import sys
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command
from django.db import connection

from lessons.models import Lesson
from lessons.search import SearchRequest, search, search_response_as_dict
from lessons.services.embeddings import embedding_refresh
from lessons.services.lessons import lesson_create

pytestmark = pytest.mark.django_db


@pytest.fixture
def lessons(team):
    created = [
        lesson_create(team=team, title="Enable row level security on every Supabase table", external_id="rls-1",
                      description="Without policies any signed-in user could read other tenants' rows.",
                      tech_stacks=["supabase"], tags=["rls"], category="security", confidence=0.9),
        lesson_create(team=team, title="Save long forms as drafts", external_id="forms-1",
                      description="Users lost what they typed when they navigated away.", category="frontend"),
        lesson_create(team=team, title="Pin base images by digest", external_id="docker-1",
                      description="A rebuilt tag pulled a different image.", category="deployment"),
    ]
    assert embedding_refresh(items=list(Lesson.objects.filter(team=team))).embedded == 3
    return created


def run(*args):
    out = StringIO()
    call_command("search", *args, stdout=out)
    return out.getvalue()


def test_table_shows_ranked_results_with_relevance(team, lessons):
    output = run("tenant data isolation", "--team", team.slug, "--explain")
    lines = output.splitlines()
    assert lines[0].startswith("mode hybrid") and "ms:" in lines[0]
    first = next(line for line in lines if line.strip().startswith("1 "))
    assert "rls-1" in first and "row level security" in first
    assert "semantic" in output and "quality" in output and "found by primary" in output
    # label feedback: the best hit shares its own tag
    assert "tags shared with the top 3 (a row among them counts its own): rls" in output


def test_explain_says_why_a_row_stands_above_higher_scores(team, lessons):
    output = run("rls", "--team", team.slug, "--explain").splitlines()
    first = output.index(next(line for line in output if line.strip().startswith("1 ")))
    assert "rls-1" in output[first]
    assert output[first + 1].endswith("ranked first: carries every query term exactly")
    later = [line for line in output[first + 2:] if "found by" in line]
    assert later and not any("ranked first" in line for line in later)


def test_json_is_the_api_object(team, lessons):
    output = run("tenant data isolation", "--team", team.slug, "--json", "--limit", "2")
    data = json.loads(output)
    expected = search_response_as_dict(search(request=SearchRequest(team=team, query="tenant data isolation", limit=2)))
    assert set(data) == set(expected) | {"search_id"}  # the API's answer carries it too
    assert [r["external_id"] for r in data["results"]] == [r["external_id"] for r in expected["results"]]
    assert data["results"][0]["external_id"] == "rls-1"
    assert "embedding" not in data["results"][0]["fields"]
    assert data["mode"] == "hybrid" and data["degraded"] is False


def test_options_reach_the_engine(team, lessons):
    data = json.loads(run("images", "--team", team.slug, "--json", "--mode", "text", "--category", "deployment",
                          "--tech-stack", "Docker", "--project-type", "saas"))
    assert [r["external_id"] for r in data["results"]] == ["docker-1"]
    data = json.loads(run("zebraquux", "--team", team.slug, "--json", "--mode", "text", "--phase", "testing"))
    assert data["fallback"] == "recency"
    assert all(r["fields"]["category"] in {"testing", "security", "performance", "workflow"} for r in data["results"])


@pytest.mark.parametrize(
    "args, field",
    [
        (["--mode", "fuzzy"], "--mode"),
        (["--kind", "notes"], "--kind"),
        (["--limit", "0"], "--limit"),
        (["--phase", "party"], "--phase"),
        (["--fusion", "borda"], "--fusion"),
        # As the API refuses them (a blank category answered "nothing matched" with recent rows):
        (["--category", " "], "--category: a blank value matches nothing"),
        (["--tech-stack", "x" * 65], "--tech-stack: x{20}…: at most 64 characters"),
        (["--project-type", "saas!"], "--project-type: 'saas!': Use ASCII letters"),
        # Lesson-only options on a memory search changed nothing; the API refuses them too.
        (["--kind", "memories", "--phase", "build"], "--phase: lessons only; this search is of memories"),
        (["--kind", "memories", "--tech-stack", "nextjs"], "--tech-stack: lessons only"),
        (["--kind", "memories", "--project-type", "saas"], "--project-type: lessons only"),
    ],
)
def test_bad_options_are_command_errors(team, lessons, args, field):
    with pytest.raises(CommandError, match=field):
        run("anything", "--team", team.slug, *args)


def test_a_query_too_long_names_the_argument_not_an_option(team):
    with pytest.raises(CommandError, match=r"^QUERY: "):
        run("x" * 2_001, "--team", team.slug, "--mode", "text")


def test_unknown_team(db):
    with pytest.raises(CommandError, match="--team"):
        run("anything", "--team", "nobody")


def test_a_bad_option_or_team_is_refused_before_the_model_loads(team, lessons, monkeypatch):
    """The model loaded (1.4 s, and its log line) before a mistyped option or team was refused."""
    from lessons.management.commands import search as search_command

    loads = []
    monkeypatch.setattr(search_command, "warm_up_in_background", lambda: loads.append(1))
    for args in (["--team", team.slug, "--mode", "bogus"], ["--team", team.slug, "--limit", "0"],
                 ["--team", team.slug, "--phase", "party"],
                 ["--team", "nobody"], ["--team", team.slug, "--kind", "memories", "--phase", "build"]):
        with pytest.raises(CommandError):
            run("anything", *args)
    assert loads == []
    run("anything", "--team", team.slug)
    assert loads == [1]


# What `manage.py search` must not import: torch and the model's Python stack (the query is encoded
# by ONNX Runtime), the MCP SDK, django-ninja with pydantic and django.test (the API), and the admin
# modules (the curation console). Each cost a CLI search tenths of a second (README, Fast CLI).
NOT_ON_THE_CLI_PATH = (
    "torch", "transformers", "sentence_transformers", "mcp", "lessons.mcp_server", "ninja", "pydantic",
    "django.test", "jinja2", "lessons.api", "lessons.admin",
)
EXIT_REPORT = (
    "import atexit, json, runpy, sys\n"
    "heavy = {heavy!r}\n"
    "atexit.register(lambda: sys.stderr.write('IMPORTED ' + json.dumps(sorted(\n"
    "    name for name in heavy if name in sys.modules)) + '\\n'))\n"
    "sys.argv = ['manage.py', *sys.argv[1:]]\n"
    "runpy.run_path('manage.py', run_name='__main__')\n"
)


PROJECT = Path(__file__).resolve().parents[2]


def _test_database_environment() -> dict[str, str]:
    """The environment of a `manage.py` subprocess that uses this run's test database (an empty
    host: libpq reads the socket folder from PGHOST)."""
    settings_dict = connection.settings_dict
    return {
        **os.environ, "DJANGO_SETTINGS_MODULE": "memory_site.settings", "DJANGO_DEBUG": "1",
        "DATABASE_URL": f"postgres://{settings_dict['USER']}@/{settings_dict['NAME']}",
        "PGHOST": str(settings_dict["HOST"]), "PGPORT": str(settings_dict["PORT"]),
    }


def test_the_command_line_search_imports_only_what_a_query_needs(demo_team):
    """Run as a person runs it, in a fresh process against the test database: a hybrid search
    (the ONNX query encoder loads), then the modules it imported are listed at exit. Not timed:
    the timing is measured and written down in the README; this keeps the causes away."""
    script = EXIT_REPORT.format(heavy=NOT_ON_THE_CLI_PATH)
    result = subprocess.run(
        [sys.executable, "-c", script, "search", "database security", "--team", demo_team.slug],
        cwd=PROJECT, env=_test_database_environment(), capture_output=True, text=True, timeout=300,
    )
    assert result.returncode == 0, result.stderr
    assert "mode hybrid" in result.stdout and "lesson-" in result.stdout  # a real search answered
    (report,) = [line for line in result.stderr.splitlines() if line.startswith("IMPORTED ")]
    assert json.loads(report.removeprefix("IMPORTED ")) == []


def test_manage_py_starts_loading_the_encoder_the_backend_will_ask_for(monkeypatch):
    """manage.py computes the graph's paths before the apps are ready; they must be the backend's."""
    import manage
    from lessons.embedding import get_embedding_backend, onnx_queries

    started = []
    monkeypatch.setattr(onnx_queries, "load_encoder_early", lambda **kwargs: started.append(kwargs))
    manage.start_query_encoder_early(["manage.py", "search", "anything", "--mode", "text"])
    assert started == []  # a text search encodes nothing
    manage.start_query_encoder_early(["manage.py", "search", "anything", "--team", "acme"])
    backend = get_embedding_backend()
    assert started == [{"model_dir": backend.model_dir, "path": backend.onnx_path, "threads": backend.query_threads}]


def test_a_reader_that_closes_the_pipe_early_gets_no_traceback(demo_team):
    """`manage.py search ... | head -2`: head exits after two lines and the command's next write
    fails. It stops quietly with the shell's status for SIGPIPE, as `ls | head` does. Here the
    reading end is closed before the command writes anything, so its first write fails."""
    process = subprocess.Popen(
        [sys.executable, "manage.py", "search", "database security", "--team", demo_team.slug, "--mode", "text"],
        cwd=PROJECT, env=_test_database_environment(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    process.stdout.close()
    _, errors = process.communicate(timeout=300)
    assert process.returncode == 141, errors
    assert "Traceback" not in errors and "BrokenPipeError" not in errors


def test_json_hits_carry_collapsed_ids_as_the_api_does(team, lessons):
    data = json.loads(run("images", "--team", team.slug, "--json", "--mode", "text", "--tech-stack", " Docker "))
    assert data["results"] and all(result["collapsed_ids"] == [] for result in data["results"])


def test_json_hits_carry_a_null_explanation_as_the_api_does(team, lessons):
    data = json.loads(run("images", "--team", team.slug, "--json", "--mode", "text"))
    assert data["results"] and all(result["explanation"] is None for result in data["results"])


def test_the_table_shows_a_stored_titles_terminal_controls_as_escapes(team):
    # a title from any agent could recolour, retitle or overwrite the operator's terminal
    lesson_create(team=team, title="Zebraquux \x1b[31mred\x1b[0m \x1b]0;pwned\x07 back\rover \u202eevil Zoë")
    output = run("zebraquux", "--team", team.slug, "--mode", "text")
    assert "\x1b" not in output and "\x07" not in output and "\r" not in output and "\u202e" not in output
    assert r"Zebraquux \x1b[31mred\x1b[0m \x1b]0;pwned\x07 back\rover \u202eevil Zoë"[:60] in output


def test_json_output_escapes_what_a_terminal_would_act_on_and_reads_back_the_same(team):
    title = "Zebraquux \x1b[31mred \x9b2J \u202eevil \u2028next"
    lesson_create(team=team, title=title)
    output = run("zebraquux", "--team", team.slug, "--mode", "text", "--json", "--no-record")
    assert not any(character in output for character in "\x1b\x9b\u202e\u2028")
    assert json.loads(output)["results"][0]["fields"]["title"] == title
