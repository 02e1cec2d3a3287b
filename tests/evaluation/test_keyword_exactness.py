"""`eval_retrieval --keyword-exactness`'s measure: the keyword leg as searched (its plan picks the
scan or the heads), the heads alone, and the whole-list scan, compared query by query."""

import pytest
from django.test import override_settings

from lessons.evaluation.keyword_exactness import keyword_exactness
from tests.search.test_keyword_heads import QUERIES, corpus

pytestmark = pytest.mark.django_db


def test_a_small_team_is_scanned_and_exact(team):
    corpus(team)
    report = keyword_exactness(queries=[(team, query) for query in QUERIES], kind="lessons", leg_limit=5)
    # heads of 500 would read every posting of these short lists: the plan scans, exact by construction
    assert (report.queries, report.scanned, report.identical_top10) == (len(QUERIES),) * 3
    assert report.head == 500 and len(report.default_ms) == len(report.head_ms) == len(report.scan_ms) == len(QUERIES)
    assert f"the scan for {len(QUERIES)}/{len(QUERIES)} queries" in report.summary()


def test_with_the_scan_ruled_out_the_search_reads_the_heads(team):
    corpus(team)
    with override_settings(SEARCH_KEYWORD_HEAD=12, SEARCH_KEYWORD_SCAN_RATIO=0):
        report = keyword_exactness(queries=[(team, query) for query in QUERIES], kind="lessons", leg_limit=1)
    assert report.head == 12 and report.scanned == 0
    assert report.identical_top10 == report.heads_identical_top10  # as searched is the heads, here
    assert report.proved < report.queries  # heads of 12 over lists of ~100 cannot prove every answer
    assert report.as_dict()["scanned"] == 0
