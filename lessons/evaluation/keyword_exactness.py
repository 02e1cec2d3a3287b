"""How often the keyword leg's impact-ordered heads give exactly the whole-list BM25 top 10
(lessons/search/keyword.py), and at what cost, over a dataset's queries."""

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
    identical_top10: int = 0  # the heads' top 10 ids, in order, equal the whole-list scan's
    proved: int = 0  # answers the heads proved exact (no fallback needed)
    head_ms: list[float] = field(default_factory=list)
    scan_ms: list[float] = field(default_factory=list)
    head: int = 0
    leg_limit: int = 0

    def share(self, count: int) -> float:
        return count / self.queries if self.queries else 1.0

    def summary(self) -> str:
        def p(values, q):
            return statistics.quantiles(values, n=100)[q - 1] if len(values) > 1 else (values[0] if values else 0.0)

        return (
            f"keyword leg, top {TOP} of {self.leg_limit} (heads of {self.head} postings a term) vs the whole-list scan: "
            f"{self.identical_top10}/{self.queries} queries identical ({100 * self.share(self.identical_top10):.1f}%), "
            f"{self.proved}/{self.queries} proved exact by the heads ({100 * self.share(self.proved):.1f}%); "
            f"p50/p95 ms heads {p(self.head_ms, 50):.1f}/{p(self.head_ms, 95):.1f}, "
            f"scan {p(self.scan_ms, 50):.1f}/{p(self.scan_ms, 95):.1f}"
        )

    def as_dict(self) -> dict:
        return {"queries": self.queries, "identical_top10": self.identical_top10, "proved": self.proved,
                "head": self.head, "leg_limit": self.leg_limit}


def keyword_exactness(*, queries: list[tuple[Team, str]], kind: str, leg_limit: int) -> ExactnessReport:
    """Each (team, query) through the heads (no fallback) and through the whole-list scan, with the
    filter a default search applies, at the leg's limit a search uses."""
    report = ExactnessReport(head=head_size(leg_limit), leg_limit=leg_limit)
    for team, text in queries:
        filter_sql, filter_params = filter_clause(kind=kind, team_id=team.pk, filters=SearchFilters())
        leg = dict(kind=kind, team_id=team.pk, query=text, filter_sql=filter_sql, filter_params=filter_params,
                   limit=leg_limit)
        started = time.perf_counter()
        heads = keyword_candidates(**leg, fallback=False)
        report.head_ms.append((time.perf_counter() - started) * 1000)
        started = time.perf_counter()
        scan = keyword_candidates(**leg, head=None)
        report.scan_ms.append((time.perf_counter() - started) * 1000)
        report.queries += 1
        report.proved += all(candidate.certain for candidate in heads)
        report.identical_top10 += [c.id for c in heads[:TOP]] == [c.id for c in scan[:TOP]]
    return report
