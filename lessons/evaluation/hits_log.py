"""`eval_retrieval --hits PATH`: every judged search's ranked hits with their explanations, one JSON
line per query and mode, so a change to the formula can be tried offline on the same candidates
(re-scored from each hit's parts) instead of re-running every search. The README's ablations were
measured that way; without the lines nobody could reproduce them.

A line:

    {"dataset": "lessons-dev", "mode": "hybrid", "query_id": "...", "query": "...", "team": "eval-...",
     "judgments": {"d18": 1, ...}, "hits": [{"rank": 1, "external_id": "d18", "collapsed_external_ids": [],
     "score": 0.786, "relevance": "medium", "labels": {"tags": [...], "tech_stacks": [...], "category": "..."},
     "explanation": {"similarity": ..., "bm25": ..., ...}}]}

The explanation is the API's (`explain`): raw cosine, feedback cosine, BM25 and its attainable
maximum, each part, the weights, the tiers and the label feedback.

The lines go to a temporary file that becomes PATH when the run is complete
(lessons/output_files.py): a run stopped or failing half way leaves the previous run's hits as
they were.
"""

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from lessons.output_files import OutputFile, written_whole
from lessons.search import SearchResponse
from lessons.search.kinds import SEARCH_KINDS

# a hit's label columns (tags, tech stacks, category; a memory's categories and emotions): what
# label feedback and the exact-term tier read, which an offline re-scoring needs beside the parts
_LABEL_COLUMNS = {kind.hit_kind: (*kind.exact_arrays, *kind.exact_scalars) for kind in SEARCH_KINDS.values()}


class HitsLog:
    """Writes one line per recorded search; `with HitsLog.writing(path, dataset=name) as log:`."""

    def __init__(self, out: OutputFile, *, dataset: str):
        self.out = out
        self.dataset = dataset
        self.lines = 0

    @classmethod
    @contextmanager
    def writing(cls, path: Path, *, dataset: str) -> Iterator["HitsLog"]:
        with written_whole(path, option="--hits") as out:
            yield cls(out, dataset=dataset)

    def record(self, *, mode: str, query_id: str, query: str, team_slug: str, judgments: dict[str, int],
               response: SearchResponse, external_ids: dict[int, str]) -> None:
        """One search's hits, as external ids (rows of the evaluated team that have none are left out)."""
        hits = []
        for hit in response.results:
            if hit.id not in external_ids:
                continue
            hits.append({
                "rank": len(hits) + 1,
                "external_id": external_ids[hit.id],
                "collapsed_external_ids": [external_ids[i] for i in hit.collapsed_ids if i in external_ids],
                "score": hit.score,
                "relevance": hit.relevance,
                "labels": {column: hit.fields.get(column) for column in _LABEL_COLUMNS[hit.kind]},
                "explanation": hit.explanation,
            })
        line = {"dataset": self.dataset, "mode": mode, "query_id": query_id, "query": query, "team": team_slug,
                "judgments": judgments, "hits": hits}
        self.out.write(json.dumps(line, ensure_ascii=False) + "\n")
        self.lines += 1
