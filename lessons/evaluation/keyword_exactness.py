"""How often the keyword leg gives exactly the whole-list BM25 top 10 (lessons/search/keyword.py),
and at what cost, over a dataset's queries: as a search runs it (the plan chooses the scan or the
heads) and with the impact-ordered heads always."""

import statistics
import time
from dataclasses import dataclass, field

from lessons.models import Team
from lessons.search.filters import filter_clause
from lessons.search.keyword import head_size, keyword_candidates
from lessons.search.types import SearchFilters

TOP = 10


@dataclass
class ExactnessReport:
    queries: int = 0
    scanned: int = 0  # queries the default plan answered with the whole-list scan
    identical_top10: int = 0  # the default plan's top 10 ids, in order, equal the whole-list scan's
    heads_identical_top10: int = 0  # the same, with the heads always
    proved: int = 0  # answers the heads proved exact (no fallback needed)
    default_ms: list[float] = field(default_factory=list)
    head_ms: list[float] = field(default_factory=list)
    scan_ms: list[float] = field(default_factory=list)
    head: int = 0
    leg_limit: int = 0

    def share(self, count: int) -> float:
        return count / self.queries if self.queries else 1.0

    def summary(self) -> str:
        def p(values, q):
            return statistics.quantiles(values, n=100)[q - 1] if len(values) > 1 else (values[0] if values else 0.0)

        def counted(count: int) -> str:
            return f"{count}/{self.queries} ({100 * self.share(count):.1f}%)"

        return (
            f"keyword leg, top {TOP} of {self.leg_limit}, against the whole-list scan: as searched (the scan for "
            f"{self.scanned}/{self.queries} queries, heads of {self.head} postings a term for the rest) identical "
            f"{counted(self.identical_top10)}; heads always: identical {counted(self.heads_identical_top10)}, "
            f"proved exact {counted(self.proved)}; p50/p95 ms as searched {p(self.default_ms, 50):.1f}/"
            f"{p(self.default_ms, 95):.1f}, heads {p(self.head_ms, 50):.1f}/{p(self.head_ms, 95):.1f}, "
            f"scan {p(self.scan_ms, 50):.1f}/{p(self.scan_ms, 95):.1f}"
        )

    def as_dict(self) -> dict:
        return {"queries": self.queries, "scanned": self.scanned, "identical_top10": self.identical_top10,
                "heads_identical_top10": self.heads_identical_top10, "proved": self.proved, "head": self.head,
                "leg_limit": self.leg_limit}


def keyword_exactness(*, queries: list[tuple[Team, str]], kind: str, leg_limit: int) -> ExactnessReport:
    """Each (team, query) as a search's keyword leg runs it (no fallback), through the heads alone
    and through the whole-list scan, with the filter a default search applies, at the leg's limit
    a search uses."""
    report = ExactnessReport(head=head_size(leg_limit), leg_limit=leg_limit)
    for team, text in queries:
        filter_sql, filter_params = filter_clause(kind=kind, team_id=team.pk, filters=SearchFilters())
        leg = dict(kind=kind, team_id=team.pk, query=text, filter_sql=filter_sql, filter_params=filter_params,
                   limit=leg_limit, fallback=False)
        runs = [(report.default_ms, leg), (report.head_ms, {**leg, "head": report.head}),
                (report.scan_ms, {**leg, "head": None})]
        answers = [[], [], []]
        # Each query's first run meets colder caches: the order turns from query to query.
        for number in range(len(runs)):
            turn = (report.queries + number) % len(runs)
            answers[turn] = _timed(*runs[turn])
        default, heads, scan = answers
        report.queries += 1
        report.scanned += any(candidate.scanned for candidate in default)
        report.proved += all(candidate.certain for candidate in heads)
        top = [c.id for c in scan[:TOP]]
        report.identical_top10 += [c.id for c in default[:TOP]] == top
        report.heads_identical_top10 += [c.id for c in heads[:TOP]] == top
    return report


def _timed(times: list[float], leg: dict) -> list:
    started = time.perf_counter()
    candidates = keyword_candidates(**leg)
    times.append((time.perf_counter() - started) * 1000)
    return candidates
