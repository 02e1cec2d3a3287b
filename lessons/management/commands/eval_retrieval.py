"""`manage.py eval_retrieval DATASET_DIR`: retrieval quality on a BEIR-layout benchmark, measured
through the same search the API uses. See lessons/evaluation/ for how."""

import logging
import math
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from functools import partial
from pathlib import Path

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError
from tqdm import tqdm

from lessons.evaluation.beir import DatasetError, dataset_files, read_dataset
from lessons.evaluation.keyword_exactness import keyword_exactness
from lessons.evaluation.graded import (
    evaluate_graded, graded_files, graded_set_load, graded_table, is_graded_set, read_graded_set,
)
from lessons.evaluation.hits_log import HitsLog
from lessons.evaluation.loading import dataset_load, evaluation_teams_drop, scope_value
from lessons.evaluation.output_files import interrupted_error, refuse_outputs_over_inputs, write_json_whole
from lessons.evaluation.runner import evaluate
from lessons.management.commands._json_output import checked_json_path
from lessons.management.commands._modes_option import DEFAULT_MODES, modes_from_option
from lessons.management.commands._stop_signal import stop_signal_as_interrupt
from lessons.search import FUSIONS, KINDS
from lessons.search.engine import search_leg_limit
from lessons.search.validation import mode_weights_refusal

WEIGHT_NAMES = ("semantic", "keyword", "quality")
# Rows are loaded in committed chunks and embedded in committed batches (loading.py): a stopped run keeps them.
KEPT_WHEN_STOPPED = "what was loaded and embedded before it is kept, and a re-run goes on from it"


def _weights(value: str | None, *, modes: list[str]) -> dict[str, float] | None:
    """`semantic=0.6,keyword=0.4,quality=0` -> a weights dict (for tuning; default: the settings')."""
    if not value:
        return None
    weights = {}
    for part in value.split(","):
        name, _, number = part.partition("=")
        name = name.strip()
        if name not in WEIGHT_NAMES:
            raise CommandError(f"--weights: unknown weight {name!r}; use {', '.join(WEIGHT_NAMES)}")
        if name in weights:  # as the API refuses a key named twice
            raise CommandError(f"--weights: {name} is given twice")
        try:
            weights[name] = float(number)
        except ValueError as error:
            raise CommandError(f"--weights: {name}: expected a number, got {number!r}") from error
        if not math.isfinite(weights[name]) or weights[name] < 0:
            raise CommandError(f"--weights: {name}: expected a number >= 0, got {number.strip()!r}")
    # Checked before the corpus loads, as the engine will check them (parts left out keep the defaults).
    if sum({**settings.SEARCH_WEIGHTS, **weights}.values()) <= 0:
        raise CommandError("--weights: at least one weight must be above 0")
    merged = {**settings.SEARCH_WEIGHTS, **weights}
    for mode in modes:  # as the engine checks each search, but before the corpus loads
        if refusal := mode_weights_refusal(mode=mode, weights=merged):
            raise CommandError(f"--weights: {refusal} (or leave the mode out with --modes)")
    return weights


class Command(BaseCommand):
    help = (
        "Measure retrieval quality on a dataset in the BEIR layout (corpus.jsonl, queries.jsonl, "
        "qrels/<split>.tsv): loads the corpus into its own team through the services, runs every judged "
        "query through the API's search, and reports nDCG@10, recall@100, MRR@10 and latency per mode. "
        "A graded lesson set (lessons.jsonl + queries.json, as shared/bench/lessons-dev) reports nDCG@5, "
        "need_in_top5, the exact, feature and never checks, and hybrid against text per query."
    )

    def add_arguments(self, parser):
        parser.add_argument("dataset_dir", help="A directory in the BEIR layout, or a graded lesson set "
                                                "(lessons.jsonl + queries.json).")
        parser.add_argument("--split", default="test", help="Which qrels/<split>.tsv to judge by (default: test).")
        parser.add_argument("--kind", default="lessons", help="Load documents as lessons (default) or memories.")
        parser.add_argument("--modes", default=DEFAULT_MODES, help="Comma-separated search modes.")
        parser.add_argument("--fusion", default="weighted", help="weighted (default) or rrf.")
        parser.add_argument("--weights", default=None, help="For tuning: semantic=..,keyword=..,quality=..")
        parser.add_argument("--scope-key", default=None, help="Metadata key: one team per value of it.")
        parser.add_argument("--max-queries", type=int, default=None, help="Only the first N judged queries.")
        parser.add_argument("--json", dest="json_path", default=None, help="Also write the results to PATH.")
        parser.add_argument(
            "--hits", dest="hits_path", default=None,
            help="Also write every judged search's ranked hits, with their explanations, to PATH (JSON lines: "
            "one per query and mode), to try a change to the formula offline on the same candidates.",
        )
        parser.add_argument("--drop", action="store_true", help="Delete the dataset's team(s) first.")
        parser.add_argument(
            "--keyword-exactness", action="store_true",
            help="Instead of the modes: how often the keyword leg's heads give the whole-list BM25 top 10 "
            "(searches at limit 10 and 100).",
        )

    def handle(self, *args, **options):
        self._unwritten: dict[str, Path | None] = {}  # option -> its output until written, for a stopped run
        # SIGTERM (a process manager's stop) ended the run at once, without a word: stopped as Ctrl-C is.
        with stop_signal_as_interrupt():
            try:
                return self._evaluate(*args, **options)
            except KeyboardInterrupt:
                raise interrupted_error(unwritten=self._unwritten, kept=KEPT_WHEN_STOPPED) from None

    def _evaluate(self, *args, dataset_dir, split, kind, modes, fusion, weights, scope_key, max_queries, json_path,
                  drop, keyword_exactness=False, hits_path=None, **options):
        if kind not in KINDS:
            raise CommandError(f"--kind: {kind!r} is not one of {', '.join(KINDS)}")
        if fusion not in FUSIONS:
            raise CommandError(f"--fusion: {fusion!r} is not one of {', '.join(FUSIONS)}")
        if max_queries is not None and max_queries < 1:
            raise CommandError("--max-queries: expected a positive number")
        mode_list = modes_from_option(modes)
        weight_map = _weights(weights, modes=mode_list)
        json_path = checked_json_path(json_path)  # found out before the evaluation runs, not after it
        hits_path = checked_json_path(hits_path, option="--hits")
        if hits_path is not None and keyword_exactness:
            raise CommandError("--hits: not used by --keyword-exactness, which measures the keyword leg alone")
        if hits_path is not None and json_path is not None and hits_path.resolve() == json_path.resolve():
            raise CommandError("--hits: the same file as --json; give each its own")
        graded = is_graded_set(Path(dataset_dir))
        self._unwritten = {"--hits": hits_path, "--json": json_path}
        refuse_outputs_over_inputs(self._unwritten,
                                   inputs=(graded_files if graded else dataset_files)(Path(dataset_dir)))
        if graded:
            # A graded set has its own layout and checks: options of the BEIR layout would be ignored.
            ignored = [
                option
                for option, value, default in (
                    ("--split", split, "test"), ("--kind", kind, "lessons"), ("--fusion", fusion, "weighted"),
                    ("--weights", weights, None), ("--scope-key", scope_key, None),
                    ("--max-queries", max_queries, None),
                )
                if value != default
            ]
            if ignored:
                raise CommandError(
                    f"{', '.join(ignored)}: not used by a graded lesson set (lessons.jsonl + queries.json), "
                    "which runs every query of queries.json as lessons with the default fusion and weights"
                )
            return self._graded(Path(dataset_dir), modes=mode_list, json_path=json_path, drop=drop,
                                exactness=keyword_exactness, hits_path=hits_path)
        try:
            dataset = read_dataset(Path(dataset_dir), split=split)
        except DatasetError as error:
            raise CommandError(str(error)) from error
        if scope_key and not any(scope_key in document.metadata for document in dataset.documents):
            # else every document would load into one team, and each query search them all
            raise CommandError(f"--scope-key: no document of {dataset.name} has the metadata key {scope_key!r}")
        if keyword_exactness and modes != DEFAULT_MODES:
            raise CommandError("--modes: not used by --keyword-exactness, which measures the keyword leg alone")

        verbosity = int(options.get("verbosity", 1))

        def progress(unit=" docs", **kwargs):
            return tqdm(file=sys.stderr, disable=verbosity < 1, leave=False, unit=unit, **kwargs)

        if drop:
            dropped = evaluation_teams_drop(dataset_name=dataset.name)
            self.stdout.write(f"dropped {dropped} team(s) of {dataset.name}")

        started = time.perf_counter()
        try:
            teams, report = dataset_load(
                dataset_name=dataset.name,
                documents=dataset.documents,
                kind=kind,
                scope_key=scope_key,
                extra_scope_values=[scope_value(query.metadata, scope_key) for query in dataset.queries],
                progress=progress,
            )
        except DatasetError as error:  # a document the services refuse (loading.py names it)
            raise CommandError(f"{Path(dataset_dir) / 'corpus.jsonl'}: {error}") from error
        self.stdout.write(
            f"{dataset.name}: {len(dataset.documents)} documents as {kind} in {len(teams)} team(s) "
            f"({report.summary()}) in {time.perf_counter() - started:.1f} s"
        )
        if report.embedding_failed:
            self.stderr.write(f"warning: {report.embedding_failed} document(s) have no embedding: "
                              f"{report.embedding_failure}")

        if keyword_exactness:
            queries = dataset.queries[:max_queries] if max_queries else list(dataset.queries)
            pairs = [(teams[scope_value(query.metadata, scope_key)], query.text) for query in queries]
            return self._exactness(pairs, kind=kind, json_path=json_path)

        # The engine logs every search at INFO: thousands of lines that would bury the table.
        search_logger = logging.getLogger("lessons.search")
        previous_level = search_logger.level
        if verbosity < 2:
            search_logger.setLevel(logging.WARNING)
        try:
            with self._hits_log(hits_path, dataset=dataset.name) as hits_log:
                evaluation = evaluate(
                    dataset=dataset,
                    teams=teams,
                    kind=kind,
                    modes=mode_list,
                    fusion=fusion,
                    weights=weight_map,
                    scope_key=scope_key,
                    max_queries=max_queries,
                    progress=partial(progress, unit=" queries"),
                    hits_log=hits_log,
                )
        finally:
            search_logger.setLevel(previous_level)
        self.stdout.write(self._table(evaluation, kind=kind, fusion=fusion, weights=weight_map))
        self._said_hits(hits_path, hits_log)
        if json_path:
            payload = {**evaluation.as_dict(), "kind": kind, "fusion": fusion}
            if weight_map:
                payload["weights"] = weight_map
            self._write_json(json_path, payload)

    def _exactness(self, pairs, *, kind: str, json_path: str | None) -> None:
        payload = {}
        for search_limit in (10, 100):
            report = keyword_exactness(queries=pairs, kind=kind, leg_limit=search_leg_limit(search_limit))
            self.stdout.write(f"search limit {search_limit}: {report.summary()}")
            payload[str(search_limit)] = report.as_dict()
        if json_path:
            self._write_json(json_path, payload)

    def _write_json(self, json_path: Path, payload: dict) -> None:
        write_json_whole(json_path, payload, stdout=self.stdout)
        self._unwritten.pop("--json")

    @contextmanager
    def _hits_log(self, hits_path: Path | None, *, dataset: str) -> Iterator[HitsLog | None]:
        if hits_path is None:
            yield None
            return
        with HitsLog.writing(hits_path, dataset=dataset) as hits_log:
            yield hits_log
        self._unwritten.pop("--hits")  # in place: a stop from here on finds it written

    def _said_hits(self, hits_path: Path | None, hits_log: HitsLog | None) -> None:
        if hits_log is not None:
            self.stdout.write(f"wrote {hits_path} ({hits_log.lines} searches with their hits)")

    def _graded(self, directory: Path, *, modes: list[str], json_path: str | None, drop: bool,
                exactness: bool = False, hits_path: Path | None = None) -> None:
        try:
            graded_set = read_graded_set(directory)
        except DatasetError as error:
            raise CommandError(str(error)) from error
        for note in graded_set.notes:
            self.stderr.write(f"note: {note}")
        if drop:
            self.stdout.write(f"dropped {evaluation_teams_drop(dataset_name=graded_set.name)} team(s) of {graded_set.name}")
        try:
            team, summary = graded_set_load(graded_set=graded_set)
        except DatasetError as error:
            raise CommandError(str(error)) from error
        self.stdout.write(f"{graded_set.name}: lessons into team {team.slug!r} ({summary})")
        if exactness:
            queries = [q.query for q in graded_set.graded] + [c.query for c in (*graded_set.exact, *graded_set.never)]
            return self._exactness([(team, query) for query in queries], kind="lessons", json_path=json_path)
        search_logger = logging.getLogger("lessons.search")
        previous_level = search_logger.level
        search_logger.setLevel(logging.WARNING)
        try:
            with self._hits_log(hits_path, dataset=graded_set.name) as hits_log:
                results = evaluate_graded(graded_set=graded_set, team=team, modes=modes, hits_log=hits_log)
        finally:
            search_logger.setLevel(previous_level)
        self.stdout.write(graded_table(graded_set=graded_set, results=results))
        self._said_hits(hits_path, hits_log)
        if json_path:
            payload = {"dataset": graded_set.name, "results": {mode: r.as_dict() for mode, r in results.items()}}
            self._write_json(json_path, payload)

    def _table(self, evaluation, *, kind: str, fusion: str, weights) -> str:
        setting = f"fusion {fusion}" + (f", weights {weights}" if weights else "")
        lines = [
            f"{evaluation.dataset} / {evaluation.split}: {evaluation.queries} queries, {kind}, {setting}",
            "",
            "| mode     | nDCG@10 | recall@100 | MRR@10 | p50 ms | p95 ms |",
            "|----------|--------:|-----------:|-------:|-------:|-------:|",
        ]
        for mode, scores in evaluation.results.items():
            lines.append(
                f"| {mode:<8} | {scores.ndcg_at_10:7.4f} | {scores.recall_at_100:10.4f} | {scores.mrr_at_10:6.4f} "
                f"| {scores.p50_ms:6.1f} | {scores.p95_ms:6.1f} |"
            )
        return "\n".join(lines)
