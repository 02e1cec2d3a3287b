"""The keyword index and the query read every text as lessons.models.KeywordText says (migration
0028): without accents ("cafe" finds "Café", "Zoe" Zoë, "strasse" "Straße", and the other way
round), and each Han, Hiragana and Katakana character a word ("咖啡" finds "我喜欢咖啡")."""

import importlib

import pytest
from django.apps import apps as current_apps
from django.db import connection

from lessons.search import SearchRequest, search
from lessons.search.kinds import canonical
from lessons.services.lessons import lesson_create, lesson_update
from lessons.services.memories import memory_create
from tests.search.test_keyword import bare_lesson, postings, stats
from tests.search.test_keyword import search as keyword_search

pytestmark = pytest.mark.django_db


def found(team, query, *, kind="lessons", mode="text"):
    response = search(request=SearchRequest(team=team, query=query, kind=kind, mode=mode, limit=5))
    return [hit.id for hit in response.results]


def test_rows_are_indexed_without_their_accents(team):
    lesson = bare_lesson(team, "Café crème au lait", "Straße naïve résumé")
    assert {"cafe", "creme", "lait", "strass", "naiv", "resum"} <= set(postings(lesson.id))
    assert not [lexeme for lexeme in postings(lesson.id) if not lexeme.isascii()]
    memory = memory_create(team=team, content="Lunch with Zoë and Søren at the Café", people=["Zoë", "Søren"])
    assert {"zoe", "soren", "cafe", "lunch"} <= set(postings(memory.id, kind="m"))


def test_a_query_with_or_without_accents_finds_the_row_either_way(team):
    accented = bare_lesson(team, "Café opening hours", "the crème brûlée sells out")
    plain = bare_lesson(team, "Cafe queue length", "creme caramel")
    bare_lesson(team, "Unrelated pool size")
    for query in ("cafe", "café", "CAFÉ"):
        assert {c.id for c in keyword_search(team, query)} == {accented.id, plain.id}, query
    for query in ("creme", "crème"):
        assert {c.id for c in keyword_search(team, query)} == {accented.id, plain.id}, query
    assert [c.id for c in keyword_search(team, "brulee")] == [accented.id]


def test_searches_through_the_engine_fold_both_sides(team):
    lesson = lesson_create(team=team, title="Résumé parsing drops the accents",
                           description="Uploads named with é or ü lost their letters", category="parsing")
    lesson_create(team=team, title="Connection pool size", description="Too many clients", category="db")
    assert found(team, "resume parsing")[0] == lesson.id
    memory = memory_create(team=team, content="Went hiking with Zoë in the Alps", people=["Zoë"])
    memory_create(team=team, content="Dinner with Priya", people=["Priya"])
    assert found(team, "Zoe", kind="memories") == [memory.id]
    assert found(team, "zoe hiking", kind="memories", mode="hybrid")[0] == memory.id


def test_a_query_word_with_an_accent_is_the_exact_term_without_it(team):
    # tags are ASCII; "café" was the term `caf` and matched no tag `cafe`
    tagged = lesson_create(team=team, title="Menu translations", description="Keep the menu in two languages",
                           tags=["cafe", "i18n"], category="content")
    lesson_create(team=team, title="Cache headers", description="Max age for menus", tags=["http"], category="web")
    for query in ("cafe i18n", "café i18n"):
        response = search(request=SearchRequest(team=team, query=query, mode="text", limit=5, explain=True))
        assert response.results[0].id == tagged.id, query
        assert response.results[0].explanation["exact_term"] is True, query


def test_a_word_inside_a_sentence_without_spaces_is_found(team):
    coffee = memory_create(team=team, content="我喜欢在东京喝咖啡", people=[])
    tea = memory_create(team=team, content="我喜欢喝茶", people=[])
    ramen = memory_create(team=team, content="ラーメンを食べた after the talk", people=[])
    assert {"咖", "啡", "东", "京"} <= set(postings(coffee.id, kind="m"))
    assert found(team, "咖啡", kind="memories") == [coffee.id]
    assert found(team, "ラーメン", kind="memories") == [ramen.id]
    # the rows carrying more of the query's characters, the rarer weighing more, come first
    assert found(team, "喜欢喝茶", kind="memories")[:2] == [tea.id, coffee.id]
    assert found(team, "咖啡", kind="memories", mode="hybrid")[0] == coffee.id


def test_a_latin_word_glued_to_chinese_forms_no_exact_tier(team):
    # "React中文" had the one term `react`: its exact-term tier put every React lesson above the
    # one saying both, which scored best and was labelled high
    both = lesson_create(team=team, title="学习React中文文档", description="用Python写脚本", category="docs")
    react = [lesson_create(team=team, title=f"React hooks pitfall {n}", description="useEffect runs twice",
                           tech_stacks=["react"], category="frontend") for n in range(4)]
    for query in ("React中文", "中文React"):
        for mode in ("text", "hybrid"):
            response = search(request=SearchRequest(team=team, query=query, mode=mode, limit=10, explain=True))
            assert response.results[0].id == both.id, (query, mode)
            assert not any(hit.explanation["exact_term"] for hit in response.results), (query, mode)
    # the Latin word alone is still a lookup of its tech stack (and of the title that says it)
    response = search(request=SearchRequest(team=team, query="react", mode="text", limit=10, explain=True))
    assert {hit.id for hit in response.results if hit.explanation["exact_term"]} == {both.id, *(r.id for r in react)}


def test_canonical_terms_fold_accents_as_the_index_does():
    assert [canonical(word) for word in ("Café", "Søren", "Straße", "Æsa", "İstanbul", "Next.js", "C++")] == [
        "cafe", "soren", "strasse", "aesa", "istanbul", "nextjs", "c++"]
    assert canonical("безопасности") == ""  # another script stays a word without a term (scoring.unlisted_words)


def test_the_keyword_text_does_not_depend_on_the_search_path(team):
    # a restore (pg_dump) runs with an empty search_path: the generated column must still compute
    with connection.cursor() as cursor:
        cursor.execute("SET LOCAL search_path = ''")
        cursor.execute("SELECT public.lessons_keyword_text('Zoë Søren Café')")
        assert cursor.fetchone() == ("Zoe Soren Cafe",)
        cursor.execute("RESET search_path")


def test_the_migration_rewrites_the_vectors_and_postings_of_rows_with_accents(team):
    migration = importlib.import_module("lessons.migrations.0028_keyword_text")
    accented = bare_lesson(team, "Café opening hours 東京")
    plain = bare_lesson(team, "Pool size")
    remembered = memory_create(team=team, content="Dinner with Zoë", people=["Zoë"])
    # the vectors and postings of before the migration, as the triggers kept them
    with connection.cursor() as cursor:
        cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")
    before = {row: postings(row) for row in (accented.id, plain.id)}, postings(remembered.id, kind="m"), stats(team)
    with connection.schema_editor(atomic=False) as editor:  # inside the test's transaction
        migration.rebuild_search_vectors(current_apps, editor)
    after = {row: postings(row) for row in (accented.id, plain.id)}, postings(remembered.id, kind="m"), stats(team)
    assert after == before
    assert "cafe" in after[0][accented.id]
    lesson_update(lesson=accented, title="Café closing hours")  # the triggers were created again
    assert "close" in postings(accented.id) and "open" not in postings(accented.id)
    assert [c.id for c in keyword_search(team, "closing cafe")] == [accented.id]


def test_compatibility_forms_are_read_as_their_plain_letters(team):
    # migration 0030: full-width Latin (as CJK keyboards type it), half-width Katakana and ligatures
    # were lexemes of their own, so "ＲＥＡＣＴ" found no row saying "React", nor "react" a row saying "ＲＥＡＣＴ"
    wide = lesson_create(team=team, title="ＲＥＡＣＴ hooks in a ﬁle of their own", description="useEffect", category="ui")
    narrow = lesson_create(team=team, title="React state lives in one store", description="hooks", category="ui")
    lesson_create(team=team, title="Connection pool size", description="Too many clients", category="db")
    assert {"react", "file"} <= set(postings(wide.id))
    for query in ("react", "ＲＥＡＣＴ", "ｒｅａｃｔ"):
        assert set(found(team, query)) == {wide.id, narrow.id}, query
    assert found(team, "file") == [wide.id]
    half = memory_create(team=team, content="ｺｰﾋｰを飲んだ", people=[])
    full = memory_create(team=team, content="コーヒーが好き", people=[])
    memory_create(team=team, content="お茶を飲んだ", people=[])
    assert {"コ", "ヒ"} <= set(postings(half.id, kind="m"))
    for query in ("コーヒー", "ｺｰﾋｰ"):
        assert set(found(team, query, kind="memories")) == {half.id, full.id}, query


def test_a_full_width_query_word_is_its_exact_term(team):
    tagged = lesson_create(team=team, title="Render twice in development", description="StrictMode",
                           tech_stacks=["react"], category="ui")
    lesson_create(team=team, title="Cache headers", description="Max age", tags=["http"], category="web")
    response = search(request=SearchRequest(team=team, query="ＲＥＡＣＴ", mode="text", limit=5, explain=True))
    assert [hit.id for hit in response.results] == [tagged.id]
    assert response.results[0].explanation["exact_term"] is True


def test_the_compatibility_migration_keeps_postings_equal_to_the_vectors(team):
    migration = importlib.import_module("lessons.migrations.0030_keyword_text_compatibility_forms")
    wide = bare_lesson(team, "ＡＰＩ ｷｰ rotation")
    plain = bare_lesson(team, "Pool size")
    with connection.cursor() as cursor:
        cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")
        # the row as 0028's function indexed it: its vector and postings held the full-width word
        cursor.execute("SELECT to_tsvector('simple', 'ＡＰＩ') = to_tsvector('simple', 'api')")
        assert cursor.fetchone() == (False,)
    before = {row: postings(row) for row in (wide.id, plain.id)}, stats(team)
    with connection.schema_editor(atomic=False) as editor:  # inside the test's transaction
        migration.read_compatibility_forms(current_apps, editor)
    after = {row: postings(row) for row in (wide.id, plain.id)}, stats(team)
    assert after == before  # the function already reads NFKC: rebuilt, nothing differs
    assert {"api", "キ"} <= set(after[0][wide.id])
    lesson_update(lesson=wide, title="ＡＰＩ ｷｰ expiry")  # the triggers were created again
    assert "expiri" in postings(wide.id) and "rotat" not in postings(wide.id)


def test_a_full_width_less_than_does_not_hide_the_words_after_it(team):
    # its compatibility form is "<", which the parser took for the start of an HTML tag (migration 0031)
    wide = lesson_create(team=team, title="Load ＜script＞ tags with defer", description="Blocking ﹤style﹥ delays paint",
                         category="frontend")
    lesson_create(team=team, title="Connection pool size", description="Too many clients", category="db")
    assert {"script", "tag", "defer", "style", "delay", "paint"} <= set(postings(wide.id))
    assert found(team, "defer") == [wide.id]
    assert found(team, "＜script＞ tags")[0] == wide.id
    with connection.cursor() as cursor:
        cursor.execute("SELECT lessons_keyword_text('a ＜b﹤c')")
        assert cursor.fetchone() == ("a  b c",)


def test_the_less_than_migration_rebuilds_rows_that_hold_one(team):
    migration = importlib.import_module("lessons.migrations.0031_keyword_text_after_compatibility_forms")
    wide = bare_lesson(team, "Use ＜style＞ blocks sparingly")
    with connection.cursor() as cursor:
        cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")
    before = postings(wide.id), stats(team)
    with connection.schema_editor(atomic=False) as editor:  # inside the test's transaction
        migration.set_aside_less_than_after_the_form(current_apps, editor)
    assert (postings(wide.id), stats(team)) == before
    assert {"use", "style", "block"} <= set(before[0])  # every word after the "＜"
