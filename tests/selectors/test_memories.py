import re
from datetime import timedelta

import pytest
from django.conf import settings
from django.db.models import Q
from django.db.models.functions import Coalesce
from django.utils import timezone

from lessons.models import Memory
from lessons.search import SearchRequest, search
from lessons.selectors.memories import (
    memories_by_emotion,
    memories_by_person,
    memories_friends,
    memories_interests,
    memories_panic_attacks,
    memories_recent_events,
    memories_search_versions,
)
from lessons.services.embeddings import embedding_refresh
from lessons.services.memories import memory_create, memory_update

pytestmark = pytest.mark.django_db


def _current(team):
    return Memory.objects.filter(team=team, current_version__isnull=True)


def test_friends_are_people_grouped_by_name(demo_team):
    response = memories_friends(team=demo_team, limit=100)
    named = {name.strip().lower() for names in _current(demo_team).values_list("people", flat=True) for name in names}
    assert response.total == len(named) == len(response.results)
    assert {person.name.lower() for person in response.results} == named
    keys = [(-person.importance, person.name.lower()) for person in response.results]
    assert keys == sorted(keys)
    mateo = next(person for person in response.results if person.name == "Mateo")
    theirs = _current(demo_team).filter(people__contains=["Mateo"])
    assert mateo.memory_count == theirs.count() and set(mateo.memory_ids) == set(theirs.values_list("id", flat=True))
    assert mateo.importance == max(theirs.values_list("importance", flat=True))
    ordered = theirs.annotate(moment=Coalesce("occurred_at", "created_at")).order_by("-importance", "-moment", "-id")
    assert mateo.memory_ids[0] == ordered[0].id  # the ids: most important first
    # the summary: a memory that says his name and names nobody else, the most important of those
    about_him = [m for m in ordered if re.search(r"\bmateo\b", m.content.lower()) and len(m.people) == 1]
    assert about_him and mateo.summary == about_him[0].content
    maria = next(person for person in response.results if person.name == "Maria")
    assert maria.summary.startswith("Maria has been my best friend")  # not the open mic she came to


def test_a_persons_summary_says_their_name_and_is_about_them(team):
    memory_create(team=team, content="Lena told me she's pregnant", people=["Lena", "David"], importance=10)
    memory_create(team=team, content="David started as a pilot", people=["David"], importance=6)
    memory_create(team=team, content="Dinner with David, Lena and Tom", people=["David", "Lena", "Tom"], importance=9)
    memory_create(team=team, content="Sessions with Dr. Okafor are monthly", people=["Dr. Okafor"], importance=3)
    memory_create(team=team, content="A panic attack in the lift", people=["Dr. Okafor"], importance=8)
    summaries = {person.name: person.summary for person in memories_friends(team=team).results}
    assert summaries == {
        "Lena": "Lena told me she's pregnant",  # says her name: the most important of hers
        "David": "David started as a pilot",  # the pregnancy names him but does not say his name
        "Tom": "Dinner with David, Lena and Tom",
        "Dr. Okafor": "Sessions with Dr. Okafor are monthly",  # a name of two words, said as words
    }


def test_friends_merge_spellings_and_count_every_category(team):
    memory_create(team=team, content="Climbing with Sam", categories=["event"], people=["Sam"], importance=4)
    memory_create(team=team, content="sam moved to Leipzig", categories=["person"], people=[" sam "], importance=7)
    memory_create(team=team, content="Sam's birthday", categories=["person"], people=["Sam", "Ana"], importance=7)
    old = memory_create(team=team, content="Ana at the lake", categories=["event"], people=["Ana"], importance=2)
    memory_update(memory=old, content="Ana and I at the lake")  # the earlier text is a version: not counted
    response = memories_friends(team=team)
    assert [(p.name, p.importance, p.memory_count) for p in response.results] == [("Ana", 7, 2), ("Sam", 7, 3)]
    sam = response.results[1]
    assert sam.summary == "sam moved to Leipzig"  # says his name and names nobody else, most important
    assert memories_friends(team=team, limit=1).total == 2


def test_friends_are_one_person_with_or_without_accents(team):
    # as the person search reads names: "Zoe" finds Zoë, so the listing must not count two people
    first = memory_create(team=team, content="Zoë's concert", people=["Zoë"], importance=5)
    second = memory_create(team=team, content="Lunch with zoe", people=["zoe"], importance=8)
    third = memory_create(team=team, content="Zoe called", people=["Zoe"], importance=3)
    memory_create(team=team, content="José at the market", people=["José"], importance=2)
    memory_create(team=team, content="Jose again", people=["Jose"], importance=2)
    response = memories_friends(team=team)
    assert response.total == 2
    zoe, jose = response.results
    assert (zoe.importance, zoe.memory_count, zoe.summary) == (8, 3, "Lunch with zoe")
    assert set(zoe.memory_ids) == {first.id, second.id, third.id}
    # one use each: on a tie the name as written with a capital, then with its accents
    assert (zoe.name, jose.name) == ("Zoë", "José")
    memory_create(team=team, content="Jose's birthday", people=["Jose"], importance=1)
    assert [person.name for person in memories_friends(team=team).results] == ["Zoë", "Jose"]  # most used


def test_panic_attacks_are_every_tagged_memory_in_order(demo_team):
    response = memories_panic_attacks(team=demo_team)
    terms = list(settings.MEMORY_PANIC_TERMS)
    tagged = _current(demo_team).filter(Q(emotions__overlap=terms) | Q(categories__overlap=terms))
    assert response.total == tagged.count() == len(response.results) > 0
    assert {m.id for m in response.results} == set(tagged.values_list("id", flat=True))
    moments = [m.occurred_at or m.created_at for m in response.results]
    assert moments == sorted(moments)


def test_panic_attacks_take_the_category_too_and_nothing_else(team):
    tagged = memory_create(team=team, content="Shaking in the lift", emotions=["Panic"], occurred_at=timezone.now())
    filed = memory_create(
        team=team, content="Attack at the station", categories=["panic-attack"],
        occurred_at=timezone.now() - timedelta(days=2),
    )
    memory_create(team=team, content="Panicked about the deadline", emotions=["anxious"])
    undated = memory_create(team=team, content="Panic at the dentist", emotions=["panic"])
    response = memories_panic_attacks(team=team)
    assert [m.id for m in response.results] == [filed.id, tagged.id, undated.id]
    assert response.total == 3
    assert memories_panic_attacks(team=team, limit=1).total == 3


def test_interests(demo_team):
    response = memories_interests(team=demo_team, limit=100)
    assert response.results and all("interest" in m.categories for m in response.results)
    assert response.total == len(response.results) == _current(demo_team).filter(categories__contains=["interest"]).count()
    keys = [(-m.importance, -(m.occurred_at or m.created_at).timestamp()) for m in response.results]
    assert keys == sorted(keys)


def test_recent_events_are_events_of_the_last_days(demo_team):
    days = 400
    response = memories_recent_events(team=demo_team, days=days)
    since = timezone.now() - timedelta(days=days)
    assert response.results
    for memory in response.results:
        assert "event" in memory.categories
        assert (memory.occurred_at or memory.created_at) >= since
    moments = [m.occurred_at or m.created_at for m in response.results]
    assert moments == sorted(moments, reverse=True)


def test_recent_events_leave_out_older_ones(team):
    recent = memory_create(team=team, content="Trip to Lisbon", categories=["event"],
                           occurred_at=timezone.now() - timedelta(days=5))
    memory_create(team=team, content="School trip", categories=["event"], occurred_at=timezone.now() - timedelta(days=400))
    memory_create(team=team, content="Lisbon is lovely", categories=["place"], occurred_at=timezone.now())
    response = memories_recent_events(team=team, days=30)
    assert [m.id for m in response.results] == [recent.id] and response.total == 1


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


def test_a_person_nobody_has_gives_no_results(demo_team):
    response = memories_by_person(team=demo_team, name="Bartholomew")
    assert response.results == [] and response.fallback is None


def test_search_across_versions_finds_earlier_texts(demo_team):
    earlier = Memory.objects.filter(team=demo_team, current_version__isnull=False).order_by("id").first()
    response = memories_search_versions(team=demo_team, query=earlier.content)
    assert earlier.id in [hit.id for hit in response.results][:3]
    assert any(hit.fields["current_version_id"] is None for hit in response.results)


def test_a_name_in_the_text_counts_as_a_word_not_as_the_start_of_one(team):
    met = memory_create(team=team, content="Had lunch with Tom at the harbour")
    memory_create(team=team, content="Planted tomatoes; tomorrow I water them")
    memory_create(team=team, content="Nobody came to the reading")
    assert [hit.id for hit in memories_by_person(team=team, name="Tom").results] == [met.pk]
    assert memories_by_person(team=team, name="Nobodyxyz").results == []


def test_a_name_in_the_text_is_one_written_as_a_name(team):
    # "Jazz" answered every memory about jazz, "Nobody" one where nobody seemed to care
    met = memory_create(team=team, content="Dinner with TOM and Nobody Smith, who plays jazz")
    written = [met, memory_create(team=team, content="A jazz night; nobody seemed to care")]
    embedding_refresh(items=written)
    assert memories_by_person(team=team, name="Jazz").results == []
    assert [hit.id for hit in memories_by_person(team=team, name="nobody").results] == [met.pk]
    assert [hit.id for hit in memories_by_person(team=team, name="tom").results] == [met.pk]
    # in `people` a name is matched in any case, as before
    tagged = memory_create(team=team, content="Band practice", people=["jazz"])
    embedding_refresh(items=[tagged])
    assert [hit.id for hit in memories_by_person(team=team, name="Jazz").results] == [tagged.pk]


@pytest.mark.parametrize("other_person", ["Samantha", "Marius", "Davidson", "Anna", "Mira"])
def test_a_similar_name_is_another_person(team, other_person):
    # a trigram match once answered each of these with someone else's memories
    written = [
        memory_create(team=team, content="Lena married David in a church outside Vienna", people=["Lena", "David"]),
        memory_create(team=team, content="Climbing with Sam on Saturday", people=["Sam"]),
        memory_create(team=team, content="Maria showed me her garden", people=["Maria"]),
    ]
    embedding_refresh(items=written)
    assert memories_by_person(team=team, name=other_person).results == []


@pytest.mark.parametrize("spelling, expected", [("Sam", "Sam"), ("sam", "Sam"), ("Mari", "Maria"), ("Marja", "Maria")])
def test_a_name_starting_the_persons_or_one_typo_away_finds_them(team, spelling, expected):
    written = [
        memory_create(team=team, content="Climbing on Saturday", people=["Sam"]),
        memory_create(team=team, content="A garden tour", people=["Maria"]),
    ]
    embedding_refresh(items=written)  # found by meaning among the memories naming them
    hits = memories_by_person(team=team, name=spelling).results
    assert [hit.fields["people"] for hit in hits] == [[expected]]


def test_an_emotion_nobody_felt_finds_nothing_and_untagged_hits_need_a_real_label(demo_team):
    # it used to answer 20 unrelated memories labelled low
    nothing = memories_by_emotion(team=demo_team, emotion="zzqqxx")
    assert nothing.results == [] and nothing.fallback is None
    lonely = memories_by_emotion(team=demo_team, emotion="lonely").results
    assert lonely and all("lonely" in hit.fields["emotions"] or hit.relevance != "low" for hit in lonely)


@pytest.mark.parametrize("typed", ["Zoe\u0301", "J.R.", "(Ann)", "Featherstonehaugh", "orla"])
def test_a_name_is_found_typed_with_a_combining_accent_or_ending_in_punctuation(team, typed):
    # "Zoe" + a combining accent is Zoé once read in NFC; "J.R." ends at its dot in the text
    written = [
        memory_create(team=team, content="Coffee with Zoé", people=["Zoé"]),
        memory_create(team=team, content="Text only: J.R. called about the roof"),
        memory_create(team=team, content="Met (Ann) at the station"),
        memory_create(team=team, content="A trip to Vienna"),
        memory_create(team=team, content="Orla's garden party", people=["Orla Featherstonehaugh"]),
    ]
    embedding_refresh(items=written)
    hits = memories_by_person(team=team, name=typed).results
    expected = typed.strip("().").replace("e\u0301", "é")
    if typed in ("Featherstonehaugh", "orla"):  # a surname, a first name: whole words of a full name
        expected = "Orla's garden party"
    assert len(hits) == 1 and expected in hits[0].fields["content"]
    assert memories_by_person(team=team, name="A").results == []  # one letter: only a name in `people`


def test_a_person_search_labels_each_hit_by_how_it_names_the_person(team):
    """Labelled by meaning, a memory listing Henrike read `low` for "Henrike" when its text was
    about a dinner: every hit names the person, and the label now says how."""
    listed = memory_create(team=team, content="Dinner at the new Thai place, too spicy", people=["henrike"])
    said = memory_create(team=team, content="Henrike called about the move", people=["Lena"])
    spelt = memory_create(team=team, content="Chess in the park", people=["Henrik"])
    embedding_refresh(items=[listed, said, spelt])
    labels = {hit.id: hit.relevance for hit in memories_by_person(team=team, name="Henrike").results}
    assert labels == {listed.pk: "high", said.pk: "medium"}  # Henrik is someone else: Henrike is someone
    labels = {hit.id: hit.relevance for hit in memories_by_person(team=team, name="Henrika").results}
    assert labels == {listed.pk: "medium", spelt.pk: "medium"}  # nobody's name: one typo from both


def test_a_memory_of_a_person_the_query_names_is_at_least_medium(team):
    anneliese = memory_create(team=team, content="Dinner at the new Thai place, too spicy", people=["Anneliese Roth"])
    others = [memory_create(team=team, content=text, people=people) for text, people in (
        ("The last time I saw the sea was in May", ["Lena"]),
        ("I see my old teacher at the market every week", []),
    )]
    embedding_refresh(items=[anneliese, *others])
    response = search(request=SearchRequest(team=team, query="when did I last see Anneliese?", kind="memories",
                                            explain=True))
    hits = {hit.id: hit for hit in response.results}
    assert hits[anneliese.pk].explanation["names_subject"]
    assert hits[anneliese.pk].relevance in {"medium", "high"}
    assert not any(hits[other.pk].explanation["names_subject"] for other in others if other.pk in hits)


@pytest.mark.parametrize("typed, expected", [
    ("Zoe", "Coffee with the neighbour"),  # Zoë in `people`
    ("zoë", "Coffee with the neighbour"),
    ("Jose", "José fixed the bike"),  # only in the text
    ("Aelfred", "The orchard walk"),  # Ælfred in `people`: one letter folded into two
    ("Ælfred", "Ælfred sang at the wedding"),  # and in the text, where a bracket of cases failed
])
def test_a_name_is_found_with_or_without_its_accents(team, typed, expected):
    written = [
        memory_create(team=team, content="Coffee with the neighbour", people=["Zoë"]),
        memory_create(team=team, content="José fixed the bike"),
        memory_create(team=team, content="The orchard walk", people=["Ælfred"]),
        memory_create(team=team, content="Ælfred sang at the wedding"),
        memory_create(team=team, content="Zora and Joseph went sailing"),  # neither name, as a word
    ]
    embedding_refresh(items=written)
    contents = [hit.fields["content"] for hit in memories_by_person(team=team, name=typed).results]
    assert expected in contents
    assert "Zora and Joseph went sailing" not in contents


def test_a_person_search_counts_every_memory_naming_them(team):
    """The seed's tool finds "all memories about a specific person": a page of `limit` said nothing
    of how many more there were."""
    naming = [memory_create(team=team, content=f"Walk number {n} with Zoë", people=["Zoë"] if n % 2 else [])
              for n in range(25)]
    others = [memory_create(team=team, content=f"Walk number {n} alone") for n in range(5)]
    embedding_refresh(items=naming + others)
    page = memories_by_person(team=team, name="Zoe", limit=10)
    assert page.total == 25 and len(page.results) == 10
    every = memories_by_person(team=team, name="Zoe", limit=100)
    assert every.total == 25 and {hit.id for hit in every.results} == {memory.pk for memory in naming}
    assert memories_by_person(team=team, name="Bartholomew").total == 0
