from datetime import timedelta

import pytest
from django.utils import timezone

from lessons.models import Memory
from lessons.selectors.memories import (
    memories_by_emotion,
    memories_by_person,
    memories_friends,
    memories_interests,
    memories_recent_events,
    memories_search_versions,
)
from lessons.services.embeddings import embedding_refresh
from lessons.services.memories import memory_create

pytestmark = pytest.mark.django_db


def test_friends_are_person_memories_by_importance(demo_team):
    response = memories_friends(team=demo_team)
    expected = Memory.objects.filter(team=demo_team, current_version__isnull=True, categories__contains=["person"])
    assert {hit.id for hit in response.results} == set(expected.values_list("id", flat=True))
    importance = [hit.fields["importance"] for hit in response.results]
    assert importance == sorted(importance, reverse=True)


def test_interests(demo_team):
    response = memories_interests(team=demo_team)
    assert response.results and all("interest" in hit.fields["categories"] for hit in response.results)
    assert len(response.results) == Memory.objects.filter(
        team=demo_team, current_version__isnull=True, categories__contains=["interest"]
    ).count()


def test_recent_events_are_events_of_the_last_days(demo_team):
    days = 400
    response = memories_recent_events(team=demo_team, days=days)
    since = timezone.now() - timedelta(days=days)
    assert response.results
    for hit in response.results:
        assert "event" in hit.fields["categories"]
        assert (hit.fields["occurred_at"] or hit.fields["created_at"]) >= since
    moments = [hit.fields["occurred_at"] for hit in response.results]
    assert moments == sorted(moments, reverse=True)


def test_panic_finds_panic_attacks_that_never_say_the_word(demo_team):
    response = memories_by_emotion(team=demo_team, emotion="panic")
    found = {hit.external_id for hit in response.results}
    tagged = set(
        Memory.objects.filter(team=demo_team, current_version__isnull=True, emotions__contains=["panic"]).values_list(
            "external_id", flat=True
        )
    )
    assert tagged <= found
    unsaid = {hit.external_id for hit in response.results if "panic" not in (hit.fields["content"] + hit.fields["details"]).lower()}
    assert {"memory-0004", "memory-0014"} <= unsaid


def test_an_untagged_panic_attack_is_found_by_meaning(demo_team):
    memory = memory_create(
        team=demo_team, content="My heart was pounding and I was sure I would faint in the crowded tram.",
        details="I couldn't breathe properly and had to get off at the next stop.", categories=["health"],
    )
    embedding_refresh(items=[memory])
    found = {hit.id for hit in memories_by_emotion(team=demo_team, emotion="panic", limit=20).results}
    assert memory.id in found


@pytest.mark.parametrize("spelling", ["Jonas", "Jon", "Jonah", "jonas"])
def test_memories_about_a_person_tolerate_spelling(demo_team, spelling):
    response = memories_by_person(team=demo_team, name=spelling)
    assert response.results
    assert all(
        "Jonas" in hit.fields["people"] or "jon" in (hit.fields["content"] + hit.fields["details"]).lower()
        for hit in response.results
    )
    about_jonas = Memory.objects.filter(team=demo_team, current_version__isnull=True, people__contains=["Jonas"]).count()
    assert sum(1 for hit in response.results if "Jonas" in hit.fields["people"]) == min(about_jonas, 20)


def test_search_across_versions_finds_earlier_texts(demo_team):
    earlier = Memory.objects.filter(team=demo_team, current_version__isnull=False).order_by("id").first()
    response = memories_search_versions(team=demo_team, query=earlier.content)
    assert earlier.id in [hit.id for hit in response.results][:3]
    assert any(hit.fields["current_version_id"] is None for hit in response.results)
