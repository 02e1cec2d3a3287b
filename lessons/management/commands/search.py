"""`python manage.py search QUERY --team SLUG`: the engine from the command line.

A readable table by default; with `--json`, the very object the API returns
(`lessons.search.search_response_as_dict`), on stdout, with its `search_id`: a `--json` search is
recorded like an agent's (source "cli"; its results count as returned) so that a script can report
the results it used to `POST /feedback`. `--no-record` leaves no trace; a table is never recorded
(a person reading, not an agent using).
"""

import json
from contextlib import contextmanager
from dataclasses import replace

from django.core.management.base import BaseCommand, CommandError

from lessons.embedding import warm_up_in_background
from lessons.management.commands._team_option import team_from_option
from lessons.management.commands._terminal import UNPRINTABLE_IN_JSON, printable
from lessons.models import SHORT_TERM_LENGTH, short_term_validator
from lessons.search import KINDS, MAX_LIMIT, MODES, SearchFilters, SearchRequest, SearchRequestError, search
from lessons.search.serialise import search_response_as_dict
from lessons.search.validation import validate
from lessons.services.usage import search_record
from lessons.text import is_visible

TITLE_WIDTH = 70


def _term(option: str, value: str) -> str:
    """A tech stack, project type or category as the API takes it (lessons/api/schemas.py, Term):
    trimmed, not blank, at most SHORT_TERM_LENGTH characters, the model's ASCII rule; lowercase.
    A blank category used to search for rows of category "" and answer with the most recent rows."""
    term = value.strip()
    if not term:
        raise CommandError(f"{option}: a blank value matches nothing; leave the option out instead")
    if len(term) > SHORT_TERM_LENGTH:
        raise CommandError(f"{option}: {term[:20]}…: at most {SHORT_TERM_LENGTH} characters")
    if not short_term_validator.regex.match(term):
        raise CommandError(f"{option}: {term!r}: {short_term_validator.message}")
    return term.lower()


@contextmanager
def _options_named():
    """A SearchRequestError as a CommandError naming the option (the query is the positional argument;
    every other field is an option of the same name)."""
    try:
        yield
    except SearchRequestError as error:
        where = "QUERY" if error.field == "query" else f"--{error.field.replace('_', '-')}"
        raise CommandError(f"{where}: {error.message}") from error


class Command(BaseCommand):
    help = "Search a team's lessons or memories (hybrid by default) and show how each result scored."
    # The system checks import every URL, API schema and admin module: ~1.5 s of a search that
    # should answer in well under 1.5 s. `manage.py check` (and every other command) runs them.
    requires_system_checks = []

    def add_arguments(self, parser):
        parser.add_argument("query", help="what to look for, in words (not blank)")
        parser.add_argument("--team", required=True, help="team slug")
        parser.add_argument("--kind", default="lessons", help=f"one of: {', '.join(KINDS)}")
        parser.add_argument("--mode", default="hybrid", help=f"one of: {', '.join(MODES)}")
        parser.add_argument("--limit", type=int, default=10, help=f"1..{MAX_LIMIT}")
        parser.add_argument("--context", default="", help="the caller's situation: editor contents, a file, ...")
        parser.add_argument("--tech-stack", action="append", default=[], help="the caller's tech stack (repeatable)")
        parser.add_argument("--project-type", default=None, help="the caller's project type")
        parser.add_argument("--category", action="append", default=[], help="only this category (repeatable)")
        parser.add_argument("--phase", default=None, help="only the categories of this project phase")
        parser.add_argument("--fusion", default="weighted", help="weighted or rrf")
        parser.add_argument("--explain", action="store_true", help="show each result's parts")
        parser.add_argument("--json", action="store_true", help="print the API's JSON object instead of a table")
        parser.add_argument(
            "--no-record", action="store_true", help="with --json: do not record the search (no search_id, no counts)"
        )

    def handle(self, *args, **options):
        if not is_visible(query := options["query"]):
            # As the API refuses it (422): an empty query answered the ten most recent rows, at score 0.
            shown = repr(query) if len(query) <= 20 else f"{query[:20]!r}…"
            raise CommandError(f"QUERY: {shown} is blank; give the words to look for")
        tech_stack = [_term("--tech-stack", value) for value in options["tech_stack"]]
        categories = [_term("--category", value) for value in options["category"]]
        project_type = None if options["project_type"] is None else _term("--project-type", options["project_type"])
        request = SearchRequest(
            team=None,
            query=query,
            kind=options["kind"],
            mode=options["mode"],
            limit=options["limit"],
            context=options["context"],
            tech_stack=tuple(tech_stack),
            project_type=project_type,
            filters=SearchFilters(categories=tuple(categories), phase=options["phase"]),
            fusion=options["fusion"],
            explain=options["explain"],
        )
        # Every option is checked, then the team looked up, before the model loads: a mistyped option
        # or team was refused only after the model had loaded (1.4 s, and its log line).
        with _options_named():
            validate(request)
        request = replace(request, team=team_from_option(options["team"]))
        if request.mode != "text":  # load the ONNX query encoder while the search builds its statement
            warm_up_in_background()
        with _options_named():
            response = search(request=request)

        if options["json"]:
            answer = search_response_as_dict(response)
            search_id = None
            if not options["no_record"]:
                search_id = search_record(
                    team=request.team, kind=request.kind, operation="search", query=request.query, mode=response.mode,
                    result_ids=response.returned_ids(), source="cli",
                )
            answer["search_id"] = None if search_id is None else str(search_id)
            text = json.dumps(answer, indent=2, ensure_ascii=False)
            self.stdout.write(UNPRINTABLE_IN_JSON.sub(lambda match: f"\\u{ord(match.group()):04x}", text))
            return
        self._table(response=response, explain=options["explain"])

    def _table(self, *, response, explain: bool) -> None:
        notes = [f"mode {response.mode}"]
        if response.degraded:
            notes.append(f"DEGRADED: {response.degraded_reason}")
        if response.fallback:
            notes.append(f"fallback: {response.fallback} (nothing matched; most recent items)")
        timings = ", ".join(f"{stage} {ms:.1f}" for stage, ms in response.timings_ms.items())
        notes.append(f"ms: {timings}")
        self.stdout.write(" | ".join(notes))
        if not response.results:
            self.stdout.write("no results")
            return
        self.stdout.write(f"{'#':>3}  {'score':>5}  {'relevance':<9}  {'id':<14}  title / content")
        for position, hit in enumerate(response.results, start=1):
            text = printable(hit.fields.get("title") or hit.fields.get("content") or "")
            if len(text) > TITLE_WIDTH:
                text = text[: TITLE_WIDTH - 1] + "…"
            ident = printable(hit.external_id or str(hit.id))
            self.stdout.write(f"{position:>3}  {hit.score:>5.3f}  {hit.relevance:<9}  {ident:<14}  {text}")
            if explain and hit.explanation:
                e = hit.explanation
                terms = ", ".join(e.get("matched_terms") or []) or "-"
                metadata = "-" if e.get("metadata") is None else f"{e['metadata']:.2f}"
                self.stdout.write(
                    f"{'':>5}semantic {e.get('semantic', 0):.2f}  keyword {e.get('keyword', 0):.2f} [{terms}]  "
                    f"metadata {metadata}  quality {e.get('quality', 0):.2f} (usage {e.get('usage', 0):.2f})  "
                    f"penalty {e.get('penalty', 0):.2f}  "
                    f"found by {', '.join(hit.found_by) or '-'}{_tier_note(e)}{_pending_note(e)}"
                )
                if labels := e.get("labels"):
                    shared = ", ".join(labels["shared"]) or "none"
                    self.stdout.write(
                        f"{'':>5}tags shared with the top {labels['top']} (a row among them counts its own): {shared}"
                    )


def _pending_note(explanation: dict) -> str:
    return "  no vector yet: scored on words and quality" if explanation.get("embedding") == "pending" else ""


def _tier_note(explanation: dict) -> str:
    """Why a row stands above higher scores: a short query ranks rows carrying its terms exactly, then
    (one word) rows saying it, before the score (the explanation's exact_term and says_query)."""
    if explanation.get("exact_term"):
        return "  ranked first: carries every query term exactly"
    if explanation.get("says_query"):
        return "  ranked first: says the query's word"
    return ""
