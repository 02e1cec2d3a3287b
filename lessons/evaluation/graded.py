"""Graded lesson sets: a folder with `lessons.jsonl` (the `import_lessons` format) and
`queries.json` (the layout of `shared/bench/lessons-dev`), judged through the same selectors
the API answers with.

`queries.json` holds four kinds of check:
- `graded`: a query, its `relevant` lesson ids and `need_in_top5`, how many of them a good search
  puts in its top 5. Scored by nDCG@5 (binary gains) and whether the need is met.
- `exact`: a tech-stack term whose top len(`all_of`) results must be exactly `all_of`.
- `feature`: a feature name as `get_patterns_for_feature` gets it; its top `top` results must
  all come from `relevant`.
- `never`: a query whose results must not contain any of `forbidden` (proposed or rejected
  lessons, which a default search never returns).
"""

import json
import time
from dataclasses import dataclass, field
from pathlib import Path

from lessons.evaluation.beir import DatasetError
from lessons.evaluation.hits_log import HitsLog
from lessons.evaluation.loading import corpus_embed, team_base_slug, team_name
from lessons.evaluation.metrics import ndcg_at_k, percentile
from lessons.models import Lesson, Team
from lessons.search import SearchRequest, SearchResponse, search
from lessons.search.validation import query_problem
from lessons.selectors.lessons import lessons_patterns_for_feature
from lessons.services.embeddings import embeddings_deferred
from lessons.services.imports import import_lessons
from lessons.services.teams import team_get_or_create
from lessons.text import is_visible

GRADED_DEPTH = 5  # need_in_top5 and nDCG@5
SEARCH_LIMIT = 10


@dataclass(frozen=True)
class GradedQuery:
    query: str
    relevant: tuple[str, ...]
    need_in_top5: int


@dataclass(frozen=True)
class ExactCheck:
    query: str
    all_of: tuple[str, ...]


@dataclass(frozen=True)
class FeatureCheck:
    feature: str
    relevant: tuple[str, ...]
    top: int


@dataclass(frozen=True)
class NeverCheck:
    query: str
    forbidden: tuple[str, ...]


@dataclass(frozen=True)
class GradedSet:
    name: str
    lessons_path: Path
    graded: tuple[GradedQuery, ...]
    exact: tuple[ExactCheck, ...] = ()
    feature: tuple[FeatureCheck, ...] = ()
    never: tuple[NeverCheck, ...] = ()
    notes: tuple[str, ...] = ()  # keys the reader does not know, said rather than refused


GRADED_FILES = ("lessons.jsonl", "queries.json")
QUERY_SECTIONS = ("graded", "exact", "feature", "never")


def is_graded_set(directory: Path) -> bool:
    """A folder with either of a graded set's files is read as one (a BEIR set has neither), so
    a set missing the other is told which file is missing, not that it lacks a BEIR corpus."""
    return any((directory / name).exists() for name in GRADED_FILES)


def graded_files(directory: Path) -> list[Path]:
    """The files of a graded set: what an output of the run must never replace."""
    return [directory / name for name in GRADED_FILES]


def _strings(value, where: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not value or not all(isinstance(item, str) and item for item in value):
        raise DatasetError(f"{where}: expected a non-empty list of ids")
    return tuple(value)


# The keys each section's entries are read by (an annotation beside them is said, not refused).
SECTION_KEYS = {
    "graded": ("query", "relevant", "need_in_top5"), "exact": ("query", "all_of"),
    "feature": ("feature", "relevant", "top"), "never": ("query", "forbidden"),
}
_KIND_WORDS = {int: "a whole number", str: "a text"}


def _field(entry, name: str, kind: type, where: str):
    if not isinstance(entry, dict):
        raise DatasetError(f"{where}: expected an object")
    if name not in entry:
        raise DatasetError(f"{where}: `{name}` is missing")
    value = entry[name]
    if not isinstance(value, kind) or isinstance(value, bool):
        raise DatasetError(f"{where}: `{name}` must be {_KIND_WORDS.get(kind, kind.__name__)}")
    if kind is str:  # as the API reads a query: a blank one scored 0 in every mode, lowering the mean
        if not is_visible(value):
            raise DatasetError(f"{where}: `{name}` is blank")
        if problem := query_problem(value):  # the search refused it after the whole set was loaded
            raise DatasetError(f"{where}: `{name}` {problem}")
    return value


def _lesson_ids(path: Path) -> set[str]:
    """The external ids of lessons.jsonl (a line that is not a lesson is left for the import to report)."""
    ids = set()
    try:
        with open(path, encoding="utf-8") as lines:
            for line in lines:
                try:
                    entry = json.loads(line.removeprefix("\ufeff"))  # a byte-order mark, as the import reads it
                except json.JSONDecodeError:
                    continue
                if isinstance(entry, dict) and isinstance(entry.get("external_id"), str):
                    ids.add(entry["external_id"])
    except (OSError, UnicodeDecodeError) as error:
        raise DatasetError(f"{path}: cannot read it: {error}") from error
    return ids


def read_graded_set(directory: str | Path) -> GradedSet:
    """Read and check a graded set; raises DatasetError naming the file and the entry at fault."""
    directory = Path(directory)
    missing = [name for name in GRADED_FILES if not (directory / name).is_file()]
    if missing:
        raise DatasetError(f"{directory}: a graded set needs lessons.jsonl and queries.json; "
                           f"{' and '.join(missing)} {'is' if len(missing) == 1 else 'are'} missing")
    path = directory / "queries.json"
    try:
        spec = json.loads(path.read_text(encoding="utf-8-sig"))  # a byte-order mark some editors write
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise DatasetError(f"{path}: cannot read it: {error}") from error
    if not isinstance(spec, dict) or not isinstance(spec.get("graded", []), list):
        raise DatasetError(f"{path}: expected an object with a `graded` list")
    unknown = sorted(set(spec) - {"note", *QUERY_SECTIONS})
    if unknown:  # a misspelt section ("grades") would be skipped without a word
        raise DatasetError(f"{path}: unknown section(s) {', '.join(map(repr, unknown))}; "
                           f"the sections are {', '.join(QUERY_SECTIONS)} (and a note)")

    def entries(section: str) -> list:
        value = spec.get(section, [])
        if not isinstance(value, list):
            raise DatasetError(f"{path}: `{section}` must be a list")
        return list(enumerate(value))

    graded = []
    for number, entry in entries("graded"):
        where = f"{path}: graded[{number}]"
        relevant = _strings(entry.get("relevant") if isinstance(entry, dict) else None, f"{where}.relevant")
        need = _field(entry, "need_in_top5", int, where)
        if not 0 < need <= min(len(relevant), GRADED_DEPTH):
            raise DatasetError(f"{where}: need_in_top5 must be 1..{min(len(relevant), GRADED_DEPTH)}")
        graded.append(GradedQuery(query=_field(entry, "query", str, where), relevant=relevant, need_in_top5=need))
    exact = [
        ExactCheck(query=_field(e, "query", str, f"{path}: exact[{n}]"),
                   all_of=_strings(e.get("all_of"), f"{path}: exact[{n}].all_of"))
        for n, e in entries("exact")
    ]
    feature = [
        FeatureCheck(feature=_field(e, "feature", str, f"{path}: feature[{n}]"),
                     relevant=_strings(e.get("relevant"), f"{path}: feature[{n}].relevant"),
                     top=_field(e, "top", int, f"{path}: feature[{n}]"))
        for n, e in entries("feature")
    ]
    for number, check in enumerate(feature):
        if not 0 < check.top <= len(check.relevant):  # top 0 would pass whatever came back
            raise DatasetError(f"{path}: feature[{number}]: top must be 1..{len(check.relevant)}")
    never = [
        NeverCheck(query=_field(e, "query", str, f"{path}: never[{n}]"),
                   forbidden=_strings(e.get("forbidden"), f"{path}: never[{n}].forbidden"))
        for n, e in entries("never")
    ]
    if not graded:
        raise DatasetError(f"{path}: no graded queries")
    notes = []
    for section, keys in SECTION_KEYS.items():
        for number, entry in entries(section):
            extra = sorted(set(entry) - set(keys)) if isinstance(entry, dict) else []
            if extra:  # a misspelt optional key would otherwise pass unseen
                notes.append(f"{path}: {section}[{number}]: key(s) {', '.join(map(repr, extra))} not read "
                             f"(an entry is read by {', '.join(keys)})")
    # Results are kept per query, and an id nobody has would quietly score as a miss.
    known = _lesson_ids(directory / "lessons.jsonl")
    for section, checks, key_name, ids_name in (
        ("graded", graded, "query", "relevant"), ("exact", exact, "query", "all_of"),
        ("feature", feature, "feature", "relevant"), ("never", never, "query", "forbidden"),
    ):
        first_of: dict[str, int] = {}
        for number, check in enumerate(checks):
            where, key = f"{path}: {section}[{number}]", getattr(check, key_name)
            if key in first_of:
                raise DatasetError(f"{where}: {key_name} {key!r} is already {section}[{first_of[key]}]")
            first_of[key] = number
            unknown = [doc_id for doc_id in getattr(check, ids_name) if doc_id not in known]
            if unknown:
                raise DatasetError(f"{where}.{ids_name}: not an external_id in lessons.jsonl: {', '.join(unknown)}")
    return GradedSet(
        name=directory.resolve().name, lessons_path=directory / "lessons.jsonl", graded=tuple(graded),
        exact=tuple(exact), feature=tuple(feature), never=tuple(never), notes=tuple(notes),
    )


def graded_set_load(*, graded_set: GradedSet) -> tuple[Team, str]:
    """Import the set's lessons into its own evaluation team (again: nothing changes) and embed
    what is due. Returns the team and a one-line summary."""
    team = team_get_or_create(slug=team_base_slug(dataset_name=graded_set.name),
                              name=team_name(dataset_name=graded_set.name))
    with embeddings_deferred(), open(graded_set.lessons_path, encoding="utf-8") as lines:
        report = import_lessons(lines=lines, team_slug=team.slug)
    report.stop_if_interrupted()  # a measure of half the set would be wrong
    if not report.ok:
        raise DatasetError(f"{graded_set.lessons_path}: " + "; ".join(f"line {n}: {why}" for n, why in report.errors[:5]))
    embedded = corpus_embed(team=team, kind="lessons")
    summary = f"{report.summary()}; {embedded.embedded} embedded"
    if embedded.embedding_failed:
        summary += f", {embedded.embedding_failed} not embedded ({embedded.embedding_failure})"
    return team, summary


@dataclass
class GradedScores:
    """One mode's results on a graded set."""

    ndcg_at_5: dict[str, float] = field(default_factory=dict)  # query -> nDCG@5
    met: dict[str, bool] = field(default_factory=dict)  # query -> need_in_top5 met
    exact: dict[str, bool] = field(default_factory=dict)
    feature: dict[str, bool] = field(default_factory=dict)
    never: dict[str, bool] = field(default_factory=dict)
    latencies_ms: list[float] = field(default_factory=list)

    @property
    def mean_ndcg(self) -> float:
        return sum(self.ndcg_at_5.values()) / max(len(self.ndcg_at_5), 1)

    def as_dict(self) -> dict:
        return {
            "ndcg@5": round(self.mean_ndcg, 4),
            "need_in_top5_met": sum(self.met.values()),
            "graded": len(self.met),
            "exact_passed": sum(self.exact.values()),
            "feature_passed": sum(self.feature.values()),
            "never_passed": sum(self.never.values()),
            "p50_ms": round(percentile(self.latencies_ms, 50), 1),
            "per_query_ndcg@5": {query: round(value, 4) for query, value in self.ndcg_at_5.items()},
        }


def _external_ids(response: SearchResponse, ids: dict[int, str]) -> list[str]:
    """Hits as external ids, a collapsed group standing for each of its members."""
    ranking = []
    for hit in response.results:
        for member in hit.collapsed_ids or [hit.id]:
            if member in ids:
                ranking.append(ids[member])
    return ranking


def evaluate_graded(*, graded_set: GradedSet, team: Team, modes: list[str],
                    hits_log: HitsLog | None = None) -> dict[str, GradedScores]:
    """Every check in each mode. With `hits_log`, each graded query's hits are written with their
    explanations (and the latency includes building them)."""
    ids = dict(Lesson.objects.filter(team=team, external_id__isnull=False).values_list("id", "external_id"))
    results: dict[str, GradedScores] = {}
    for mode in modes:
        scores = GradedScores()

        def run(query: str, limit: int = SEARCH_LIMIT, judgments: dict[str, int] | None = None) -> list[str]:
            explain = hits_log is not None and judgments is not None
            started = time.perf_counter()
            response = search(request=SearchRequest(team=team, query=query, mode=mode, limit=limit, explain=explain))
            scores.latencies_ms.append((time.perf_counter() - started) * 1000)
            if explain:
                hits_log.record(mode=mode, query_id=query, query=query, team_slug=team.slug, judgments=judgments,
                                response=response, external_ids=ids)
            return _external_ids(response, ids)

        for check in graded_set.graded:
            judgments = {doc_id: 1 for doc_id in check.relevant}
            ranking = run(check.query, judgments=judgments)
            scores.ndcg_at_5[check.query] = ndcg_at_k(ranking, judgments, GRADED_DEPTH)
            found = len(set(ranking[:GRADED_DEPTH]) & set(check.relevant))
            scores.met[check.query] = found >= check.need_in_top5
        for check in graded_set.exact:
            ranking = run(check.query, limit=len(check.all_of) + 5)
            scores.exact[check.query] = set(ranking[: len(check.all_of)]) == set(check.all_of)
        for check in graded_set.feature:
            # The shortcut's own request (its query template and keyword query); mode is its default.
            response = lessons_patterns_for_feature(team=team, feature=check.feature, limit=check.top)
            ranking = _external_ids(response, ids)
            scores.feature[check.feature] = len(ranking) >= check.top and set(ranking[: check.top]) <= set(check.relevant)
        for check in graded_set.never:
            scores.never[check.query] = not set(run(check.query)) & set(check.forbidden)
        results[mode] = scores
    return results


def graded_table(*, graded_set: GradedSet, results: dict[str, GradedScores]) -> str:
    """A table per mode (one line each), then nDCG@5 per query with the hybrid against each leg."""
    counts = (len(graded_set.graded), len(graded_set.exact), len(graded_set.feature), len(graded_set.never))
    lines = [
        f"{graded_set.name}: {counts[0]} graded queries, {counts[1]} exact, {counts[2]} feature, {counts[3]} never checks",
        "",
        "| mode     | nDCG@5 | need_in_top5 met | exact | feature | never | p50 ms |",
        "|----------|-------:|-----------------:|------:|--------:|------:|-------:|",
    ]
    for mode, scores in results.items():
        lines.append(
            f"| {mode:<8} | {scores.mean_ndcg:6.4f} | {sum(scores.met.values()):>9}/{counts[0]:<6} "
            f"| {sum(scores.exact.values())}/{counts[1]:<3} | {sum(scores.feature.values())}/{counts[2]:<5} "
            f"| {sum(scores.never.values())}/{counts[3]:<3} | {percentile(scores.latencies_ms, 50):6.1f} |"
        )
    modes = list(results)
    # the hybrid against each leg it fuses: text (issue 10's count) and semantic
    legs = [leg for leg in ("text", "semantic") if "hybrid" in modes and leg in modes]
    lines += ["", "| query | " + " | ".join(modes) + "".join(f" | hybrid - {leg}" for leg in legs) + " |"]
    lines.append("|---|" + "---:|" * (len(modes) + len(legs)))
    wins = {leg: 0 for leg in legs}
    losses = {leg: 0 for leg in legs}
    for check in graded_set.graded:
        values = [results[mode].ndcg_at_5[check.query] for mode in modes]
        marks = ["" if results[mode].met[check.query] else "*" for mode in modes]
        row = f"| {check.query} | " + " | ".join(f"{v:.3f}{m}" for v, m in zip(values, marks))
        for leg in legs:
            delta = results["hybrid"].ndcg_at_5[check.query] - results[leg].ndcg_at_5[check.query]
            wins[leg] += delta > 0
            losses[leg] += delta < 0
            row += f" | {delta:+.3f}"
        lines.append(row + " |")
    if any(not met for scores in results.values() for met in scores.met.values()):
        lines.append("(* need_in_top5 not met)")
    for leg in legs:
        lines.append(f"hybrid above {leg} on {wins[leg]} of {counts[0]} graded queries, under it on {losses[leg]}")
    return "\n".join(lines)
