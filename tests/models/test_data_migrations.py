"""Data migrations, run on rows as an earlier version of the code left them."""

import importlib
import unicodedata
from datetime import UTC, datetime
from types import SimpleNamespace

import pytest
from django.apps import apps
from django.db import DataError, connection

from lessons.models import Memory
from lessons.services.memories import memory_create

pytestmark = pytest.mark.django_db


def test_people_written_before_nfc_become_one_name_each_and_nothing_else_moves(team):
    decomposed = unicodedata.normalize("NFD", "Zoë")
    assert decomposed != "Zoë"
    legacy = memory_create(team=team, content="Coffee with Zoë and Sam", people=["Sam"])
    Memory.objects.filter(pk=legacy.pk).update(people=[decomposed, "Sam", "Zoë"])  # as stored before
    ascii_only = memory_create(team=team, content="Lunch with Bo", people=["Bo"])
    before = {memory.pk: memory.updated_at for memory in Memory.objects.all()}

    migration = importlib.import_module("lessons.migrations.0015_people_names_in_nfc")
    migration.names_to_nfc(apps, None)

    legacy.refresh_from_db()
    assert legacy.people == ["Zoë", "Sam"]
    assert Memory.objects.get(pk=ascii_only.pk).people == ["Bo"]
    assert {memory.pk: memory.updated_at for memory in Memory.objects.all()} == before


def test_moments_python_cannot_read_are_brought_into_range_and_the_row_works_again(team, admin_client):
    early = memory_create(team=team, content="An empty date from a .NET client")
    late = memory_create(team=team, content="A date meaning never")
    fine = memory_create(team=team, content="A real date", occurred_at=datetime(2024, 5, 1, tzinfo=UTC))
    with connection.cursor() as cursor:  # as earlier versions stored them
        cursor.execute("UPDATE lessons_memory SET occurred_at = '0001-01-01T01:00:00+05:00' WHERE id = %s", [early.pk])
        cursor.execute("UPDATE lessons_memory SET occurred_at = '9999-12-31T23:00:00-05:00' WHERE id = %s", [late.pk])
    with pytest.raises(DataError):  # what every read of the row did
        list(Memory.objects.filter(pk=late.pk))
    before = dict(Memory.objects.values_list("pk", "updated_at"))

    migration = importlib.import_module("lessons.migrations.0017_memory_moments_in_range")
    migration.bring_moments_into_range(apps, SimpleNamespace(connection=connection))

    moments = dict(Memory.objects.values_list("pk", "occurred_at"))
    assert moments[early.pk] == datetime(1, 1, 1, tzinfo=UTC)
    assert moments[late.pk] == datetime(9999, 12, 31, 23, 59, 59, 999999, tzinfo=UTC)
    assert moments[fine.pk] == datetime(2024, 5, 1, tzinfo=UTC)
    assert dict(Memory.objects.values_list("pk", "updated_at")) == before
    assert admin_client.get("/admin/lessons/memory/").status_code == 200


def test_postings_of_people_with_accents_are_signed_again_without_them(team):
    """Migration 0024: a memory's people sign its postings as the `people` filter compares them,
    so a filter naming "Zoe" may skip postings by signature without skipping Zoë's."""
    from lessons.search.signature import value_bits

    zoe = memory_create(team=team, content="Coffee with Zoë", people=["Zoë"])
    bo = memory_create(team=team, content="Lunch with Bo", people=["Bo"])
    migration = importlib.import_module("lessons.migrations.0024_people_signatures_unaccented")

    def signatures(memory) -> set[int]:
        with connection.cursor() as cursor:
            cursor.execute("SELECT DISTINCT signature FROM lessons_keyword_posting WHERE kind = 'm' AND row_id = %s",
                           [memory.pk])
            return {value for (value,) in cursor.fetchall()}

    def signed(name: str) -> int:
        bits = value_bits("current", "yes") | value_bits("people", name)
        return bits - (1 << 64) if bits >= 1 << 63 else bits

    with connection.cursor() as cursor:
        cursor.execute(migration.AS_BEFORE + migration.RESIGN_NON_ASCII)  # as 0011 signed them
    assert (signatures(zoe), signatures(bo)) == ({signed("zoë")}, {signed("bo")})
    with connection.cursor() as cursor:
        cursor.execute(migration.FOLDED + migration.RESIGN_NON_ASCII)
    assert (signatures(zoe), signatures(bo)) == ({signed("zoe")}, {signed("bo")})
