"""`manage.py simulate_usage DATASET_DIR`: learning from use, measured on a BEIR-layout dataset
with a train and a test split (see lessons/evaluation/usage_simulation.py for how)."""

import logging
import math
import sys
from functools import partial
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError
from tqdm import tqdm

from lessons.evaluation.beir import DatasetError, dataset_files, read_dataset
from lessons.evaluation.loading import dataset_load, team_base_slug
from lessons.evaluation.metrics import percentile
from lessons.evaluation.output_files import interrupted_error, refuse_outputs_over_inputs, write_json_whole
from lessons.evaluation.usage_simulation import simulate_usage
from lessons.management.commands._json_output import checked_json_path
from lessons.management.commands._stop_signal import stop_signal_as_interrupt
from lessons.models import Team
from lessons.search import KINDS, MODES


def _weights(value: str) -> list[float]:
    try:
        weights = [float(part) for part in value.split(",") if part.strip()]
    except ValueError as error:
        raise CommandError(f"--usage-weights: expected numbers separated by commas, got {value!r}") from error
    if not weights or any(not math.isfinite(weight) or weight < 0 for weight in weights):
        raise CommandError(f"--usage-weights: one or more finite numbers >= 0, got {value!r}")
    return weights


class Command(BaseCommand):
    help = (
        "Replay a dataset's train queries as an agent that reports the judged relevant results of its top 10 "
        "as used, then measure nDCG@10 on the train queries again and on the test queries, with and without "
        "the usage signal."
    )

    def add_arguments(self, parser):
        parser.add_argument("dataset_dir", help="A directory in the BEIR layout with both splits.")
        parser.add_argument("--train-split", default="train", help="Replayed with feedback (default: train).")
        parser.add_argument("--test-split", default="test", help="Measured only (default: test).")
        parser.add_argument("--kind", default="lessons", help="Load documents as lessons (default) or memories.")
        parser.add_argument("--mode", default="hybrid", help="Search mode (default: hybrid).")
        parser.add_argument("--usage-weights", default="0.5", help="SEARCH_USAGE_WEIGHT values to measure after (0: the signal off).")
        parser.add_argument("--max-queries", type=int, default=None, help="Only the first N judged queries a split.")
        parser.add_argument(
            "--no-load", action="store_true",
            help="Use the dataset's team as an earlier run left it (no loading, no embedding).",
        )
        parser.add_argument("--keep", action="store_true", help="Keep the recorded searches and counts afterwards.")
        parser.add_argument("--json", dest="json_path", default=None, help="Also write the results to PATH.")

    def handle(self, *args, **options):
        self._unwritten: dict[str, Path | None] = {}  # --json until written, for a stopped run
        # SIGTERM (a process manager's stop) ended the run at once, without a word: stopped as Ctrl-C is.
        with stop_signal_as_interrupt():
            try:
                return self._simulate(*args, **options)
            except KeyboardInterrupt:
                # the replay's searches and counts are reset on the way out (usage_simulation.py) unless kept
                kept = "the searches recorded before it are kept (--keep); " if options.get("keep") else ""
                raise interrupted_error(
                    unwritten=self._unwritten, kept=f"{kept}the documents loaded before it are kept",
                ) from None

    def _simulate(self, *args, dataset_dir, train_split, test_split, kind, mode, usage_weights, max_queries, keep,
                  json_path, no_load, **options):
        if kind not in KINDS:
            raise CommandError(f"--kind: {kind!r} is not one of {', '.join(KINDS)}")
        if mode not in MODES:
            raise CommandError(f"--mode: {mode!r} is not one of {', '.join(MODES)}")
        if max_queries is not None and max_queries < 1:
            raise CommandError("--max-queries: expected a positive number")
        weights = _weights(usage_weights)
        json_path = checked_json_path(json_path)  # before the simulation, not after it
        self._unwritten = {"--json": json_path}
        refuse_outputs_over_inputs(self._unwritten, inputs=dataset_files(Path(dataset_dir)))
        try:
            train = read_dataset(Path(dataset_dir), split=train_split)
            test = read_dataset(Path(dataset_dir), split=test_split)
        except DatasetError as error:
            raise CommandError(str(error)) from error
        verbosity = int(options.get("verbosity", 1))

        def progress(unit=" docs", **kwargs):
            return tqdm(file=sys.stderr, disable=verbosity < 1, leave=False, unit=unit, **kwargs)

        if no_load:
            team = Team.objects.filter(slug=team_base_slug(dataset_name=train.name)).first()
            if team is None:
                raise CommandError(f"--no-load: {train.name} was never loaded; run without --no-load first")
            teams = {None: team}
        else:
            teams, report = dataset_load(dataset_name=train.name, documents=train.documents, kind=kind,
                                         progress=progress)
            self.stdout.write(f"{train.name}: {len(train.documents)} documents as {kind} ({report.summary()})")
        search_logger = logging.getLogger("lessons.search")
        previous_level = search_logger.level
        if verbosity < 2:
            search_logger.setLevel(logging.WARNING)
        try:
            result = simulate_usage(
                train=train, test=test, team=teams[None], kind=kind, mode=mode, usage_weights=weights,
                max_queries=max_queries, keep=keep, progress=partial(progress, unit=" queries"),
            )
        finally:
            search_logger.setLevel(previous_level)
        self.stdout.write(self._table(result, train=train, test=test))
        if json_path:
            write_json_whole(json_path, result.as_dict(), stdout=self.stdout)

    def _table(self, result, *, train, test) -> str:
        replay = result.replay
        lines = [
            f"{result.dataset}, {result.mode}: replayed {replay.searches} {train.split} queries (top 10), "
            f"reported {replay.used_reported} relevant results as used in {replay.queries_with_use} of them",
            f"recording a search: p50 {percentile_text(replay.record_ms, 50)} ms, p95 "
            f"{percentile_text(replay.record_ms, 95)} ms; a feedback report: p50 "
            f"{percentile_text(replay.feedback_ms, 50)} ms; the search itself (limit 100): p50 "
            f"{result.search_ms_p50:.1f} ms",
            "",
            "| nDCG@10 | " + " | ".join(f"{name} ({len(data.queries)} q)" for name, data in
                                       ((train.split, train), (test.split, test))) + " |",
            "|---|" + "---:|" * 2,
            "| before feedback | " + " | ".join(f"{result.before[s]:.4f}" for s in (train.split, test.split)) + " |",
        ]
        for weight, scores in result.after.items():
            label = "after, signal off (weight 0)" if weight == 0 else f"after, usage weight {weight:g}"
            cells = [
                f"{scores[s]:.4f} ({scores[s] - result.before[s]:+.4f})" for s in (train.split, test.split)
            ]
            lines.append(f"| {label} | " + " | ".join(cells) + " |")
        return "\n".join(lines)


def percentile_text(values, p) -> str:
    return f"{percentile(values, p):.2f}" if values else "-"
