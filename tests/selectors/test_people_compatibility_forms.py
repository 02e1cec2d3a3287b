"""People's names compare in their Unicode compatibility form (NFKC, migration 0033), as search and the
lists' text filter read text. PostgreSQL's unaccent() already folded full-width Latin ("Ｓａｍ" is Sam: those
cases guard it), but not half-width Katakana: "ｱｷﾗ" was another person than アキラ in the friends listing,
the person search and the `people` filters; nor a circled letter ("Ⓢam")."""

import importlib

import pytest
from django.apps import apps as current_apps
from django.db import connection

from lessons.search import SearchFilters, SearchRequest, search
from lessons.selectors.memories import memories_by_person, memories_friends
from lessons.services.api_keys import api_key_create
from lessons.services.embeddings import embedding_refresh
from lessons.services.memories import memory_create
from tests.api.conftest import JsonClient

pytestmark = pytest.mark.django_db


def test_friends_are_one_person_in_any_width(team):
    sam = memory_create(team=team, content="Climbing with Sam", people=["Sam"], importance=4)
    wide = memory_create(team=team, content="Ｓａｍ moved to Leipzig", people=["Ｓａｍ"], importance=7)
    akira = memory_create(team=team, content="アキラの誕生日", people=["アキラ"], importance=3)
    half = memory_create(team=team, content="ｱｷﾗとカラオケ", people=["ｱｷﾗ"], importance=2)
    response = memories_friends(team=team)
    # one use each: the spelling in the compatibility form names them
    assert [(p.name, p.importance, p.memory_count, p.memory_ids) for p in response.results] == [
        ("Sam", 7, 2, [wide.pk, sam.pk]), ("アキラ", 3, 2, [akira.pk, half.pk])]
    assert response.total == 2
    # the spelling most memories write still names them, in any width
    memory_create(team=team, content="Ｓａｍ again", people=["Ｓａｍ"], importance=1)
    assert memories_friends(team=team).results[0].name == "Ｓａｍ"


def test_a_summary_says_the_name_in_any_width(team):
    memory_create(team=team, content="Climbing in the gym", people=["Sam"], importance=9)
    memory_create(team=team, content="Ｓａｍ moved to Leipzig", people=["Sam"], importance=5)
    memory_create(team=team, content="Karaoke night", people=["アキラ"], importance=8)
    memory_create(team=team, content="ｱｷﾗの誕生日", people=["アキラ"], importance=2)
    summaries = {person.name: person.summary for person in memories_friends(team=team).results}
    # the more important memory does not say the name: the one saying it, full- or half-width, does
    assert summaries == {"Sam": "Ｓａｍ moved to Leipzig", "アキラ": "ｱｷﾗの誕生日"}


@pytest.mark.parametrize("asked", ["Sam", "Ｓａｍ", "ｓａｍ", " Ｓａｍ "])
def test_a_person_is_found_asked_in_any_width(team, asked):
    listed = memory_create(team=team, content="Dinner at the lake", people=["Sam"])
    wide = memory_create(team=team, content="Chess in the park", people=["Ｓａｍ"])
    said = memory_create(team=team, content="Ｓａｍ called about the move", people=["Lena"])
    told = memory_create(team=team, content="Sam sent the photos", people=["Lena"])
    other = memory_create(team=team, content="Samantha's wedding", people=["Samantha"])
    embedding_refresh(items=[listed, wide, said, told, other])
    response = memories_by_person(team=team, name=asked)
    # listed in either width: theirs (high); said in the text in either width: a mention (medium)
    assert {hit.id: hit.relevance for hit in response.results} == {
        listed.pk: "high", wide.pk: "high", said.pk: "medium", told.pk: "medium"}
    assert response.total == 4


@pytest.mark.parametrize("asked", ["アキラ", "ｱｷﾗ"])
def test_a_person_written_in_katakana_is_found_in_either_width(team, asked):
    listed = memory_create(team=team, content="Karaoke night", people=["アキラ"])
    half = memory_create(team=team, content="Movie night", people=["ｱｷﾗ"])
    said = memory_create(team=team, content="今日はｱｷﾗと映画を見た", people=["Lena"])
    memory_create(team=team, content="Tea with Lena", people=["Lena"])
    embedding_refresh(items=list(team.memories.all()))
    response = memories_by_person(team=team, name=asked)
    assert {hit.id: hit.relevance for hit in response.results} == {
        listed.pk: "high", half.pk: "high", said.pk: "medium"}


@pytest.mark.parametrize("asked", ["Ｑｕｉｎｎ", "Quinn", "ｸｲﾝ"])
def test_a_name_nobody_has_gives_nothing_in_any_width(team, asked):
    written = [memory_create(team=team, content="Ｓａｍ moved to Leipzig", people=["Ｓａｍ"]),
               memory_create(team=team, content="ｱｷﾗとカラオケ", people=["ｱｷﾗ"])]
    embedding_refresh(items=written)
    response = memories_by_person(team=team, name=asked)
    assert (response.results, response.total, response.fallback) == ([], 0, None)


def test_a_name_nobody_lists_finds_a_name_it_starts_in_any_width(team):
    # no memory lists "Ｊｏｎ": the name it starts stands for it, in either width
    jonas = memory_create(team=team, content="Chess in the park", people=["Ｊｏｎａｓ"])
    memory_create(team=team, content="Tea with Lena", people=["Lena"])
    embedding_refresh(items=list(team.memories.all()))
    assert [hit.id for hit in memories_by_person(team=team, name="Jon").results] == [jonas.pk]


@pytest.mark.parametrize("stored, asked", [("Ｓａｍ", "Sam"), ("Sam", "Ｓａｍ"), ("ｻﾑ", "サム"), ("サム", "ｻﾑ")])
def test_the_people_filter_of_a_search_finds_a_name_in_any_width(team, stored, asked):
    wide = memory_create(team=team, content="A walk to the lighthouse", people=[stored])
    memory_create(team=team, content="The lighthouse keeper's dog", people=["Lena"])
    response = search(request=SearchRequest(team=team, query="lighthouse", kind="memories", mode="text",
                                            filters=SearchFilters(people=(asked,))))
    assert ([hit.id for hit in response.results], response.fallback) == ([wide.pk], None)


def _signatures(memory) -> set[int]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT DISTINCT signature FROM lessons_keyword_posting WHERE kind = 'm' AND row_id = %s",
                       [memory.pk])
        return {signature for (signature,) in cursor.fetchall()}


def test_the_migration_signs_postings_with_names_in_their_compatibility_form(team):
    # the keyword leg skips a posting whose signature lacks the filter's name: signed "ⓢam" (unaccent()
    # leaves a circled letter as it is; fancy-text generators write names so), the memory was never read
    # for a filter naming "sam"
    migration = importlib.import_module("lessons.migrations.0033_people_names_compatibility_forms")
    circled = memory_create(team=team, content="A walk to the lighthouse", people=["Ⓢam"])
    plain = memory_create(team=team, content="The lighthouse keeper's dog", people=["Lena"])
    with connection.cursor() as cursor:
        cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")

    def found() -> list[int]:
        response = search(request=SearchRequest(team=team, query="lighthouse", kind="memories", mode="text",
                                                filters=SearchFilters(people=("sam",))))
        return [hit.id for hit in response.results] if response.fallback is None else []

    signed = _signatures(circled), _signatures(plain)
    assert found() == [circled.pk]
    with connection.schema_editor(atomic=False) as editor:  # inside the test's transaction
        migration.fold_names_as_before(current_apps, editor)
        assert (_signatures(circled) != signed[0], _signatures(plain) == signed[1]) == (True, True)
        migration.fold_names_in_compatibility_form(current_apps, editor)
    assert (_signatures(circled), _signatures(plain)) == signed
    assert found() == [circled.pk]


@pytest.mark.parametrize("spellings, asked", [(("Sam", "Ｓａｍ"), "Sam"), (("Sam", "Ｓａｍ"), "Ｓａｍ"),
                                              (("サム", "ｻﾑ"), "サム"), (("サム", "ｻﾑ"), "ｻﾑ")])
def test_the_lists_person_filter_finds_a_name_in_any_width(team, spellings, asked):
    for content, spelling in zip(("Dinner at the lake", "Chess in the park"), spellings, strict=True):
        memory_create(team=team, content=content, people=[spelling])
    memory_create(team=team, content="Tea with Lena", people=["Lena"])
    api = JsonClient(api_key_create(team=team, name="agent")[1])
    listed = api.get("/memories", {"person": asked}).json()
    assert sorted(m["content"] for m in listed["items"]) == ["Chess in the park", "Dinner at the lake"]
