"""A person search when the name asked for is someone's: that person's own memories (their name in
`people`, any case, with or without accents: the friends listing's one person) come first, and
`total` counts the memories naming them, as the friends listing's `memory_count` does, plus those
whose text says the name. Another name it starts or is one typo from (Tomke, Tomasz for "Tom") is
someone else then; it is the answer only when nobody has the name."""

import pytest

from lessons.models import Memory
from lessons.search import SearchFilters, SearchRequest, search
from lessons.selectors import memories as selectors
from lessons.services.api_keys import api_key_create
from lessons.services.embeddings import embedding_refresh
from lessons.services.memories import memory_create
from tests.api.conftest import JsonClient

pytestmark = pytest.mark.django_db


def _remembered(team, *rows):
    """Memories `(content, people)`, embedded, as a commit would have them."""
    written = [memory_create(team=team, content=content, people=people) for content, people in rows]
    embedding_refresh(items=written)
    return written


def _by_person(api, name, **params):
    response = api.get("/memories/by-person", {"name": name, **params})
    assert response.status_code == 200, response.content
    body = response.json()
    return body, [(hit["id"], hit["relevance"]) for hit in body["results"]]


def _memory_count(api, name):
    friends = api.get("/memories/friends").json()["results"]
    return next(person["memory_count"] for person in friends if person["name"] == name)


def test_on_the_demo_data_toms_memories_come_first_and_total_is_his(demo_team):
    """The outside tester's repro: Tomke's memory (a prefix of nobody's, "Tom" starts it) came 4th,
    above five of Tom's own, and `total` said 10 where get_all_friends said 8."""
    api = JsonClient(api_key_create(team=demo_team, name="tester")[1])
    others = _remembered(demo_team, ("Tomke, the new neighbour, brought over a plate of cookies", ["Tomke"]),
                         ("Tomasz fixed the bike's brakes at the shop", ["Tomasz"]))
    toms = set(Memory.objects.filter(team=demo_team, current_version__isnull=True, people__contains=["Tom"])
               .values_list("id", flat=True))
    body, hits = _by_person(api, "Tom", limit=12)
    assert {memory_id for memory_id, _ in hits} == toms
    assert {label for _, label in hits} == {"high"}
    assert not {memory.pk for memory in others} & {memory_id for memory_id, _ in hits}
    assert body["total"] == len(toms) == _memory_count(api, "Tom") == 8


def test_the_persons_own_memory_comes_before_another_name_and_a_mention(api, team):
    # in a small team the one memory listing Tom came last, below "Met Tomas" and a mention
    own, mention, _ = _remembered(team, ("Band practice in the garage", ["Tom"]),
                                  ("Had dinner; Tom told the story about Tom's dog again", []),
                                  ("Met Tomas at the climbing gym", ["Tomas"]))
    body, hits = _by_person(api, "Tom")
    assert hits == [(own.pk, "high"), (mention.pk, "medium")]
    assert body["total"] == 2


@pytest.mark.parametrize("asked, stored, other", [
    ("TOM", "Tom", "Tomke"),  # any case
    ("Zoe", "Zoë", "Zoey"),  # without its accent; one typo away
    ("søren", "Soren", "Sorensen"),  # with an accent the stored name lacks; a prefix
])
def test_another_name_is_another_person_when_the_name_is_someones(api, team, asked, stored, other):
    own, _ = _remembered(team, ("Band practice in the garage", [stored]), ("Band practice in the garage", [other]))
    body, hits = _by_person(api, asked)
    assert (hits, body["total"]) == ([(own.pk, "high")], 1)
    assert _memory_count(api, stored) == 1


def test_with_nobody_of_that_name_the_names_it_starts_and_typos_still_answer(api, team):
    tomke, tomasz = _remembered(team, ("A plate of cookies from next door", ["Tomke"]),
                                ("The bike's brakes, fixed", ["Tomasz"]))
    body, hits = _by_person(api, "Tom")
    assert sorted(hits) == sorted([(tomke.pk, "medium"), (tomasz.pk, "medium")]) and body["total"] == 2
    body, hits = _by_person(api, "Tomaszz")
    assert (hits, body["total"]) == ([(tomasz.pk, "medium")], 1)


def _own_and_mentions(team):
    """Four memories listing Tom about nothing in particular, and memories whose text keeps saying
    his name, which rank by words above his own."""
    own = _remembered(team, *((f"Band practice number {n}", ["Tom"]) for n in range(4)))
    mentions = _remembered(team, *((f"Tom and Tom's brother Tom, story {n}", ["Lena"]) for n in range(6)))
    return own, mentions


def _ranked_among_his_own(team, limit, filters):
    """The search's own order among the memories listing Tom, for the rows `filters` keep, as
    by-person asks it."""
    response = search(request=SearchRequest(team=team, query="memories about Tom", kind="memories", limit=limit,
                                            filters=filters, similarity_floor=0.0))
    return [hit.id for hit in response.results if "Tom" in hit.fields["people"]]


@pytest.mark.parametrize("limit", [3, 6, 20])
def test_every_own_memory_comes_before_any_mention_in_the_rankings_order(api, team, limit):
    _own_and_mentions(team)
    body, hits = _by_person(api, "Tom", limit=limit)
    # the order the ranking of every memory naming Tom gives his own
    wanted = _ranked_among_his_own(team, 100, SearchFilters(person_like="Tom"))
    assert [memory_id for memory_id, _ in hits[:4]] == wanted[:limit]
    assert [label for _, label in hits] == (["high"] * 4 + ["medium"] * 6)[:limit]
    assert body["total"] == 10


def test_own_memories_beyond_what_the_ranking_reads_at_once_still_come_first(api, team, monkeypatch):
    # more memories name the person than one search ranks (the engine's MAX_LIMIT): their own come
    # from a search of their own, not only from those the first ranking reached
    monkeypatch.setattr(selectors, "PERSON_RANKING_WIDTH", 5)
    own, _ = _own_and_mentions(team)
    body, hits = _by_person(api, "Tom", limit=4)
    assert hits == [(memory_id, "high") for memory_id in _ranked_among_his_own(team, 4, SearchFilters(people=("Tom",)))]
    assert {memory_id for memory_id, _ in hits} == {memory.pk for memory in own} and body["total"] == 10


def test_a_name_in_a_script_without_spaces_is_found_in_the_text(api, team):
    # "no letter touching it" never holds inside a Chinese sentence: 小李 was never found in the text
    said = memory_create(team=team, content="今天小李来我家吃饭", people=[])
    listed = memory_create(team=team, content="一起去爬山", people=["小李"])
    memory_create(team=team, content="小王来了", people=[])
    body = api.get("/memories/by-person", {"name": "小李"}).json()
    assert [(hit["id"], hit["relevance"]) for hit in body["results"]] == [(listed.pk, "high"), (said.pk, "medium")]
    assert body["total"] == 2
