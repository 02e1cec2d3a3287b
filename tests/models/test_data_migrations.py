"""Data migrations, run on rows as an earlier version of the code left them."""

import importlib
import unicodedata

import pytest
from django.apps import apps

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
