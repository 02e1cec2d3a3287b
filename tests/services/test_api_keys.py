from datetime import timedelta

import pytest
from django.core.exceptions import ValidationError
from django.db import connection
from django.test.utils import CaptureQueriesContext

from lessons.models import ApiKey
from lessons.services.api_keys import api_key_authenticate, api_key_create, api_key_digest, api_key_revoke

pytestmark = pytest.mark.django_db


def test_create_returns_the_raw_key_once_and_stores_its_hash(team):
    api_key, raw_key = api_key_create(team=team, name=" agent ")
    assert api_key.name == "agent"
    assert raw_key.startswith("msk_") and len(raw_key) > 40
    assert api_key.key_hash == api_key_digest(raw_key) != raw_key
    assert raw_key.startswith(api_key.prefix) and len(api_key.prefix) == 12
    assert api_key_create(team=team, name="agent")[1] != raw_key  # random every time


def test_a_name_is_required(team):
    with pytest.raises(ValidationError) as error:
        api_key_create(team=team, name="  ")
    assert "name" in error.value.message_dict
    assert not ApiKey.objects.exists()


def test_authenticate_finds_the_team_and_records_use(team):
    api_key, raw_key = api_key_create(team=team, name="agent")
    found = api_key_authenticate(raw_key=raw_key)
    assert found.pk == api_key.pk and found.team == team
    first_use = ApiKey.objects.get(pk=api_key.pk).last_used_at
    assert first_use is not None
    # Within a minute the time is not rewritten: a read stays a read.
    api_key_authenticate(raw_key=raw_key)
    assert ApiKey.objects.get(pk=api_key.pk).last_used_at == first_use
    ApiKey.objects.filter(pk=api_key.pk).update(last_used_at=first_use - timedelta(minutes=5))
    api_key_authenticate(raw_key=raw_key)
    assert ApiKey.objects.get(pk=api_key.pk).last_used_at > first_use - timedelta(minutes=5)


@pytest.mark.parametrize("raw_key", ["", "msk_", "msk_wrong", "x" * 10_000, "not-ours"])
def test_authenticate_refuses_unknown_keys(team, raw_key):
    api_key_create(team=team, name="agent")
    assert api_key_authenticate(raw_key=raw_key) is None


def test_revoked_keys_no_longer_authenticate(team):
    api_key, raw_key = api_key_create(team=team, name="agent")
    api_key_revoke(api_key=api_key)
    assert api_key_authenticate(raw_key=raw_key) is None
    revoked_at = ApiKey.objects.get(pk=api_key.pk).revoked_at
    api_key_revoke(api_key=api_key)  # revoking twice keeps the first time
    assert ApiKey.objects.get(pk=api_key.pk).revoked_at == revoked_at


def test_the_lookup_of_a_key_reads_the_active_prefix_index(team):
    # Thousands of keys and fresh statistics, as a deployment has: on a near-empty table every index
    # costs about the same and the planner's pick between them is a tie (CI once took the team index).
    ApiKey.objects.bulk_create(
        ApiKey(team=team, name=f"key {n}", prefix=f"msk_{n:08x}", key_hash=f"{n:064x}") for n in range(5000)
    )
    _, raw_key = api_key_create(team=team, name="agent")
    with CaptureQueriesContext(connection) as queries:
        assert api_key_authenticate(raw_key=raw_key) is not None
    lookup = next(q["sql"] for q in queries.captured_queries if 'FROM "lessons_apikey"' in q["sql"])
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE lessons_apikey")
        cursor.execute("EXPLAIN " + lookup)
        plan = "\n".join(row[0] for row in cursor.fetchall())
    assert "api_key_active_prefix" in plan, plan
