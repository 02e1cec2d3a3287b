from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from lessons.models import Lesson, Team


@pytest.mark.django_db(transaction=True)  # the bench commits, deletes its team and vacuums
def test_bench_measures_and_cleans_up():
    out = StringIO()
    call_command("bench_embeddings", skip_demo=True, synthetic=24, rounds=1, batch_size=8, stdout=out)
    report = out.getvalue()
    assert "24 synthetic lessons: 24 rows" in report
    for line in ("raw encode", "backfill ", "write only", "backfill/raw"):
        assert line in report
    assert not Team.objects.filter(slug__startswith="bench-").exists()
    assert not Lesson.objects.exists()


@pytest.mark.parametrize("options, message", [
    ({"batch_size": 0}, "--batch-size must be at least 1, not 0"),
    ({"rounds": 0}, "--rounds must be at least 1, not 0"),
    ({"synthetic": -1}, "--synthetic must be at least 0, not -1"),  # the message named all three, no value
])
def test_bench_refuses_bad_numbers_naming_the_one_at_fault(db, options, message):
    with pytest.raises(CommandError, match=message):
        call_command("bench_embeddings", stdout=StringIO(), **options)
