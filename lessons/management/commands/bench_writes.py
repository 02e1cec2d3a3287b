"""`python manage.py bench_writes`: inserts per second with N concurrent writers into one team.

Every insert into a team also updates that team's keyword statistics (migration 0002's triggers),
so concurrent writers may queue on one row. This measures it: `--writers` processes insert
synthetic lessons or memories through the API's services (or, `--path insert`, as bare INSERTs)
for `--seconds` (or `--rows` each), in transactions of `--batch` rows, while the parent samples
what they wait on. It reports rows, inserts/s overall and per writer, p50/p95/p99 per transaction,
errors by type (deadlocks, serialization failures) and the lock waits seen; `--compare` first runs
one writer alone, for the scaling ratio. Then it checks that the keyword index agrees with the team's rows, and deletes the
rows it wrote unless `--keep`. No embedding is computed or queued (see lessons.benchmarks.writes).
Exits non-zero when the index and the rows disagree.
"""

import os
import uuid

from django.core.management.base import BaseCommand, CommandError
from django.db import connection

from lessons.benchmarks.writes import KINDS, PATHS, PhaseResult, delete_benchmark_rows, run_phase
from lessons.evaluation.output_files import write_json_whole
from lessons.management.commands._json_output import checked_json_path
from lessons.selectors.keyword_index import keyword_index_check
from lessons.services.teams import TeamError, team_get_or_create

MAX_WRITERS = 64  # each writer holds a connection; the embedded server allows 100
MAX_SECONDS = 3600
DEFAULT_SECONDS = 20


class Command(BaseCommand):
    help = "Benchmark concurrent inserts into one team: inserts/s, latency, errors, lock waits, index consistency."

    def add_arguments(self, parser):
        parser.add_argument(
            "--writers", type=int, default=8, help=f"Concurrent writer processes (1..{MAX_WRITERS}; 8)."
        )
        amount = parser.add_mutually_exclusive_group()
        amount.add_argument("--seconds", type=float, help=f"How long each writer inserts ({DEFAULT_SECONDS}).")
        amount.add_argument("--rows", type=int, help="Rows each writer inserts, instead of --seconds.")
        parser.add_argument("--team", default="bench-writes", help="Throwaway team (created if missing; bench-writes).")
        parser.add_argument("--kind", default="lessons", help="lessons or memories (lessons).")
        parser.add_argument("--batch", type=int, default=1, help="Rows per transaction (1, as the API writes).")
        parser.add_argument(
            "--path", default="service",
            help="service: the API's lesson_create / memory_create (default); insert: one bare INSERT a row.",
        )
        parser.add_argument("--compare", action="store_true", help="Run 1 writer first and report the scaling.")
        parser.add_argument("--keep", action="store_true", help="Keep the rows the run wrote.")
        parser.add_argument("--seed", default="7", help="Seed of the synthetic rows (7).")
        parser.add_argument("--json", dest="json_path", help="Also write the figures to this file.")

    def handle(self, *args, **options):
        writers, kind, batch = options["writers"], options["kind"], options["batch"]
        seconds, rows = options["seconds"], options["rows"]
        # call_command passes options past argparse, so its checks (choices, the group) are made here.
        if not 1 <= writers <= MAX_WRITERS:
            raise CommandError(f"--writers must be between 1 and {MAX_WRITERS}, not {writers}")
        if kind not in KINDS:
            raise CommandError(f"--kind must be one of {', '.join(KINDS)}, not {kind!r}")
        if options["path"] not in PATHS:
            raise CommandError(f"--path must be one of {', '.join(PATHS)}, not {options['path']!r}")
        if batch < 1:
            raise CommandError(f"--batch must be at least 1, not {batch}")
        if seconds is not None and rows is not None:
            raise CommandError("give --seconds or --rows, not both")
        if rows is None:
            seconds = DEFAULT_SECONDS if seconds is None else seconds
            if not 0 < seconds <= MAX_SECONDS:
                raise CommandError(f"--seconds must be more than 0 and at most {MAX_SECONDS}, not {seconds}")
        elif rows < 1:
            raise CommandError(f"--rows must be at least 1, not {rows}")
        json_path = checked_json_path(options["json_path"])
        if connection.in_atomic_block:
            raise CommandError(
                "bench_writes cannot run inside a transaction: its writers use connections of their own "
                "and would not see uncommitted data (in tests: django_db(transaction=True))"
            )
        try:
            team = team_get_or_create(slug=options["team"])
        except TeamError as error:
            raise CommandError(f"--team: {error}") from error

        amount = f"{seconds:g} s" if rows is None else f"{rows} rows"
        load_before = os.getloadavg()[0]
        self.stdout.write(
            f"bench_writes: {kind} into team {team.slug} via {options['path']}, {amount} per writer, "
            f"{batch} row(s) per transaction, writer processes; embeddings deferred (no model, no task per row); "
            f"{os.cpu_count()} CPUs, load average {load_before:.2f}"
        )
        run_id = uuid.uuid4().hex[:8]
        counts = [1, writers] if options["compare"] and writers > 1 else [writers]
        phases: list[PhaseResult] = []
        for count in counts:
            phase = run_phase(
                writers=count, kind=kind, path=options["path"], team=team, batch=batch, seconds=seconds, rows=rows,
                seed=f"{options['seed']}-{run_id}-{count}",
            )
            phases.append(phase)
            self._report_phase(phase)
        scaling = None
        if len(phases) == 2 and phases[0].inserts_per_s > 0:
            scaling = phases[1].inserts_per_s / phases[0].inserts_per_s
            self.stdout.write(
                f"scaling: {phases[1].inserts_per_s:.1f} / {phases[0].inserts_per_s:.1f} inserts/s = "
                f"{scaling:.2f}x with {writers} writers (ideal {writers}x, per writer {scaling / writers:.0%})"
            )

        check = keyword_index_check(kind=kind, team=team)
        self._report_check("keyword index after the run", check)
        cleanup = {"kept": options["keep"], "deleted": 0, "check": None}
        if not options["keep"]:
            cleanup["deleted"] = delete_benchmark_rows(kind=kind, team=team)
            after = keyword_index_check(kind=kind, team=team)
            cleanup["check"] = after.as_dict()
            self.stdout.write(f"cleanup: deleted {cleanup['deleted']} {kind} the benchmarks wrote")
            self._report_check("keyword index after the cleanup", after)
        else:
            self.stdout.write(f"kept: {check.rows} {kind} in team {team.slug} (their embeddings are pending)")

        figures = {
            "kind": kind,
            "path": options["path"],
            "team": team.slug,
            "batch": batch,
            "seconds": seconds,
            "rows_per_writer": rows,
            "writer_model": "processes",
            "embeddings": "deferred",
            "machine": {"cpus": os.cpu_count(), "load_average_before": round(load_before, 2),
                        "load_average_after": round(os.getloadavg()[0], 2)},
            "phases": [phase.as_dict() for phase in phases],
            "scaling": None if scaling is None else {"writers": writers, "ratio": round(scaling, 3)},
            "consistency": check.as_dict(),
            "cleanup": cleanup,
        }
        if json_path is not None:
            write_json_whole(json_path, figures, stdout=self.stdout)
        consistent = check.ok and (cleanup["check"] is None or cleanup["check"]["ok"])
        if not consistent:
            raise CommandError("the keyword index does not agree with the rows (see the mismatches above)")

    def _report_phase(self, phase: PhaseResult) -> None:
        figures = phase.as_dict()
        latency, errors, waits = figures["latency_ms"], figures["errors"], figures["lock_waits"]
        label = f"{phase.writers} writer{'s' if phase.writers > 1 else ''}"
        self.stdout.write(
            f"\n{label}: {figures['rows']} rows in {figures['seconds']:.1f} s = "
            f"{figures['inserts_per_s']:.1f} inserts/s"
        )
        if latency["count"]:
            self.stdout.write(
                f"  latency per transaction: p50 {latency['p50']:.1f} ms, p95 {latency['p95']:.1f} ms, "
                f"p99 {latency['p99']:.1f} ms, max {latency['max']:.1f} ms"
            )
        rates = ", ".join(f"{writer['inserts_per_s']:.1f}" for writer in figures["per_writer"])
        self.stdout.write(f"  per writer (inserts/s): {rates}")
        by_type = ", ".join(f"{name} {count}" for name, count in errors["by_type"].items())
        self.stdout.write(f"  errors: {errors['total']}" + (f" ({by_type})" if by_type else ""))
        for writer in figures["per_writer"]:
            if writer["fatal"]:
                self.stderr.write(f"  writer {writer['writer']} failed: {writer['fatal']}")
        if waits["samples"]:
            relations = ", ".join(f"{name} {count}" for name, count in waits["relations"].items()) or "none"
            events = ", ".join(f"{name} {count}" for name, count in waits["lock_events"].items()) or "none"
            self.stdout.write(
                f"  lock waits: {waits['share_of_samples']:.0%} of {waits['samples']} samples had a writer waiting "
                f"(mean {waits['mean_waiting']:.2f}, max {waits['max_waiting']} of {phase.writers}); "
                f"on {relations}; lock types {events}"
            )
            states = ", ".join(f"{state} {share:.0%}" for state, share in list(waits["writer_states"].items())[:6])
            self.stdout.write(f"  writer backends: {states}")
        if waits["error"]:
            self.stderr.write(f"  sampling stopped: {waits['error']}")

    def _report_check(self, title: str, check) -> None:
        if check.ok:
            self.stdout.write(
                f"{title}: OK (doc_count {check.doc_count} over {check.stats_rows} stats row(s) = rows {check.rows}; "
                f"postings {check.postings} = lexemes {check.lexemes}; every row has postings; field lengths agree)"
            )
        else:
            self.stdout.write(f"{title}: MISMATCH: {'; '.join(check.mismatches)}")
