"""The usage signal (lessons/search/usage.py) and its hook in the quality part: pure arithmetic."""

from datetime import UTC, datetime, timedelta

import pytest

from lessons.search.kinds import SEARCH_KINDS
from lessons.search.usage import usage_signal

NOW = datetime(2026, 11, 23, 12, 0, tzinfo=UTC)


def signal(**kwargs):
    return usage_signal(**{"returned": 0, "used": 0, "last_used_at": NOW, "now": NOW, **kwargs})


def test_never_used_is_zero_whatever_was_returned():
    assert signal(returned=0) == 0.0
    assert signal(returned=500, not_helpful=3) == 0.0
    assert signal(returned=10, last_used_at=None) == 0.0


def test_smoothed_share_of_appearances():
    assert signal(returned=1, used=1) == pytest.approx(1 / 3)
    assert signal(returned=5, used=5) == pytest.approx(5 / 7)
    assert signal(returned=50, used=50) == pytest.approx(50 / 52)
    # A steady record is worth more than one lucky use, and a use among many returns less.
    assert signal(returned=5, used=5) > signal(returned=1, used=1) > signal(returned=10, used=1)


def test_not_helpful_counts_as_an_appearance_without_use():
    assert signal(returned=4, used=2, not_helpful=2) == pytest.approx(2 / 8)
    assert signal(returned=4, used=2, not_helpful=2) < signal(returned=4, used=2)


def test_decays_by_half_every_half_life():
    fresh = signal(returned=5, used=5)
    assert signal(returned=5, used=5, last_used_at=NOW - timedelta(days=90)) == pytest.approx(fresh / 2)
    assert signal(returned=5, used=5, last_used_at=NOW - timedelta(days=180)) == pytest.approx(fresh / 4)
    assert signal(returned=5, used=5, last_used_at=NOW - timedelta(days=30), half_life_days=30) == pytest.approx(fresh / 2)
    # A clock skew (last use "in the future") never lifts above the undecayed value.
    assert signal(returned=5, used=5, last_used_at=NOW + timedelta(days=9)) == pytest.approx(fresh)


def test_always_between_0_and_1():
    assert signal(returned=0, used=7, prior=0) == 1.0  # used without a counted return: capped
    assert 0 <= signal(returned=3, used=3, prior=0) <= 1


LESSON = {"confidence": 0.5, "frequency": 1, "returned_count": 5, "not_helpful_count": 0, "last_used_at": NOW}


def test_quality_hook_is_exact_without_use(settings):
    settings.SEARCH_USAGE_WEIGHT = 0.5
    base = SEARCH_KINDS["lessons"].quality({"confidence": 0.5, "frequency": 1}, NOW)
    assert SEARCH_KINDS["lessons"].quality({**LESSON, "used_count": 0}, NOW) == base
    memory = {"importance": 5, "updated_at": NOW - timedelta(days=3)}
    assert SEARCH_KINDS["memories"].quality({**memory, "returned_count": 9, "used_count": 0}, NOW) == (
        SEARCH_KINDS["memories"].quality(memory, NOW)
    )


def test_quality_hook_adds_weight_times_signal_capped_at_1(settings):
    settings.SEARCH_USAGE_WEIGHT = 0.5
    base = SEARCH_KINDS["lessons"].quality({"confidence": 0.5, "frequency": 1}, NOW)
    lifted = SEARCH_KINDS["lessons"].quality({**LESSON, "used_count": 5}, NOW)
    assert lifted == pytest.approx(base + 0.5 * 5 / 7)
    top = {**LESSON, "confidence": 1.0, "frequency": 10, "used_count": 5}
    assert SEARCH_KINDS["lessons"].quality(top, NOW) == 1.0
    settings.SEARCH_USAGE_WEIGHT = 0
    assert SEARCH_KINDS["lessons"].quality({**LESSON, "used_count": 5}, NOW) == base


def test_the_usage_a_quality_holds_is_told_apart(settings):
    settings.SEARCH_USAGE_WEIGHT = 0.5
    lessons = SEARCH_KINDS["lessons"]
    base = lessons.quality({"confidence": 0.5, "frequency": 1}, NOW)
    assert lessons.quality_and_usage({**LESSON, "used_count": 0}, NOW) == (base, 0.0)
    quality, usage = lessons.quality_and_usage({**LESSON, "used_count": 5}, NOW)
    assert quality == pytest.approx(base + 0.5 * 5 / 7) and usage == pytest.approx(0.5 * 5 / 7)
    # Capped at 1: the usage is what it added, not what it would have added.
    top = {**LESSON, "confidence": 1.0, "frequency": 10, "used_count": 5}
    top_base = lessons.quality({**top, "used_count": 0}, NOW)
    assert lessons.quality_and_usage(top, NOW) == (1.0, pytest.approx(1.0 - top_base))
