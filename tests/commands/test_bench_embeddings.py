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


@pytest.mark.parametrize("options", [{"batch_size": 0}, {"rounds": 0}, {"synthetic": -1}])
def test_bench_refuses_bad_numbers(db, options):
    with pytest.raises(CommandError, match="at least"):
        call_command("bench_embeddings", stdout=StringIO(), **options)
