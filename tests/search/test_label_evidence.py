"""What a hit's label and explanation rest on (lessons/search/exact.py, encode.py, engine.py).

1. A row found through another stored spelling of a query's term ("errorhandling" for the tag
   "error handling", "vue3" for the tech stack "vue 3") is measured by its words as that spelling's
   query measures it: it showed no matched terms and read `medium` where the stored spelling read
   `high`, because the text parser reads the two spellings as different words.
2. A query the model reads no word of (emoji, symbols, a script it lacks) has no meaning to
   measure: the model maps it to its unknown word piece, and a hit read `high` on that cosine alone.
"""

import pytest
from django.db import connection
from django.test import override_settings
from django.test.utils import CaptureQueriesContext

from lessons.search import SearchRequest, search
from lessons.search.encode import model_reads
from lessons.search.exact import with_spelled_keyword_signals
from lessons.search.kinds import SEARCH_KINDS
from lessons.services.lessons import lesson_create
from lessons.services.memories import memory_create

pytestmark = pytest.mark.django_db

WEBHOOK = {
    "title": "Retry the payment webhook",
    "description": "Errors from the payment provider were swallowed; handle them and retry.",
    "tags": ["error handling"],
    "tech_stacks": ["vue 3", "next.js"],
}


@pytest.fixture
def webhook(team, django_capture_on_commit_callbacks):
    """The testers' lesson, embedded with the real model, beside two that carry none of its terms."""
    with django_capture_on_commit_callbacks(execute=True):
        lesson = lesson_create(team=team, **WEBHOOK)
        lesson_create(team=team, title="Cache the price list", description="Prices were cached for an hour.",
                      tags=["caching"], tech_stacks=["django"])
        lesson_create(team=team, title="Split the bundle", description="The bundle grew past 2 MB.",
                      tags=["bundle-size"], tech_stacks=["vue"])
    return lesson


def hit_for(team, query, lesson, *, mode):
    response = search(request=SearchRequest(team=team, query=query, mode=mode, explain=True))
    return next(hit for hit in response.results if hit.id == lesson.pk)


WORDS = ("matched_terms", "keyword", "bm25", "bm25_max")


@pytest.mark.parametrize("stored, variant", [
    ("error handling", "errorhandling"), ("error handling", "error-handling"), ("error handling", "Error_Handling"),
    ("vue 3", "vue3"), ("vue 3", "vue-3"), ("next.js", "nextjs"), ("next.js", "NextJS"),
])
def test_a_spelled_variant_is_explained_and_labelled_as_the_stored_spelling(team, webhook, stored, variant):
    as_stored = hit_for(team, stored, webhook, mode="text")
    as_variant = hit_for(team, variant, webhook, mode="text")
    assert as_stored.relevance == "high" and as_stored.explanation["matched_terms"]
    assert as_variant.explanation["exact_term"]
    assert {name: as_variant.explanation[name] for name in WORDS} == {name: as_stored.explanation[name]
                                                                      for name in WORDS}
    assert as_variant.relevance == "high"


@pytest.mark.parametrize("stored, variant", [("error handling", "errorhandling"), ("vue 3", "vue3")])
def test_in_hybrid_mode_the_variant_has_the_stored_spellings_words(team, webhook, stored, variant):
    # meaning is each query's own cosine; the words are the same
    as_stored = hit_for(team, stored, webhook, mode="hybrid")
    as_variant = hit_for(team, variant, webhook, mode="hybrid")
    assert {name: as_variant.explanation[name] for name in WORDS} == {name: as_stored.explanation[name]
                                                                      for name in WORDS}
    assert as_variant.explanation["similarity"] is not None


def test_a_row_stored_without_the_punctuation_is_found_for_the_spelling_with_it(team):
    lesson = lesson_create(team=team, title="Prefetch the links", description="Links prefetch on hover.",
                           tech_stacks=["nextjs"])
    as_stored = hit_for(team, "nextjs", lesson, mode="text")
    as_variant = hit_for(team, "next.js", lesson, mode="text")
    assert as_variant.explanation["matched_terms"] == as_stored.explanation["matched_terms"] == ["nextjs"]
    assert as_variant.relevance == as_stored.relevance


def test_a_query_spelled_as_its_rows_costs_no_statement_more(team, webhook):
    with CaptureQueriesContext(connection) as stored:
        search(request=SearchRequest(team=team, query="next.js", mode="text"))
    with CaptureQueriesContext(connection) as variant:
        search(request=SearchRequest(team=team, query="nextjs", mode="text"))
    assert not any("spelled_postings" in query["sql"] for query in stored.captured_queries)
    assert len(variant.captured_queries) == len(stored.captured_queries) + 1


def test_a_row_keeps_its_own_words_when_they_say_more_than_its_spelling(team, webhook):
    # a row whose text also says the query's spelling may match it better than its stored one
    fields = {name: value for name, value in vars(webhook).items() if not name.startswith("_")}
    strong = {**fields, "bm25_p": 2.0, "bm25_max": 2.0, "terms_p": ["errorhandl"], "coverage_p": 1.0}
    bare = {**fields, "bm25_p": None, "bm25_max": None, "terms_p": None, "coverage_p": None}
    with_spelled_keyword_signals(kind=SEARCH_KINDS["lessons"], team_id=team.pk, query="errorhandling",
                                 rows=[strong, bare], exact_terms=["errorhandling"],
                                 written={"errorhandling": {"errorhandling"}})
    assert strong["terms_p"] == ["errorhandl"] and strong["bm25_p"] == 2.0
    assert sorted(bare["terms_p"]) == ["error", "handl", "handling"] and 0 < bare["bm25_p"] < bare["bm25_max"]


# --- queries without a word the model reads ---------------------------------------------------------


@pytest.mark.parametrize("text", ["😀", "😀😀 🎉", "①", "→→", "!!!", "∑", "€", "ฐานข้อมูล", "咖啡"])
def test_the_model_reads_no_word_of_symbols_or_a_script_it_lacks(text):
    assert not model_reads(text)


@pytest.mark.parametrize("text", ["database", "😀 database", "c#", "42", "x", "日本", "база данных", "→ retries"])
def test_the_model_reads_a_word_it_knows(text):
    assert model_reads(text)


def test_a_backend_without_a_tokenizer_encodes_every_query():
    hashing = {"BACKEND": "lessons.embedding.backends.HashingBackend"}
    with override_settings(EMBEDDING_BACKEND=hashing):
        assert model_reads("😀")


@pytest.fixture
def symbols(team, django_capture_on_commit_callbacks):
    """A lesson written in symbols, whose vector lies near every unreadable query's, among lessons in words."""
    with django_capture_on_commit_callbacks(execute=True):
        lesson = lesson_create(team=team, title="✅ → 🚀", description="∑ ∫ ① ② → ✔", tags=[])
        lesson_create(team=team, title="Index the foreign keys", description="Joins on unindexed keys were slow.",
                      tags=["postgres"])
        lesson_create(team=team, title="Pin the Node version", description="CI and laptops ran different Nodes.",
                      tags=["ci"])
    return lesson


@pytest.mark.parametrize("query", ["😀", "→→", "∑ ∫", "🚀🚀"])
@pytest.mark.parametrize("mode", ["hybrid", "semantic", "text"])
def test_a_query_without_a_readable_word_finds_nothing_in_every_mode(team, symbols, query, mode):
    # before, hybrid and semantic mode returned the symbols lesson `high` on the [UNK] vector's cosine
    response = search(request=SearchRequest(team=team, query=query, mode=mode, explain=True))
    assert response.fallback == "recency" and not response.degraded
    assert {hit.relevance for hit in response.results} == {"low"}
    assert {hit.score for hit in response.results} == {0.0}


def test_a_symbol_beside_a_word_still_searches_by_meaning(team, symbols):
    response = search(request=SearchRequest(team=team, query="🚀 foreign keys", mode="hybrid", explain=True))
    assert response.fallback is None and "semantic" in response.candidates
    assert response.results[0].explanation["similarity"] is not None


def test_a_script_the_model_lacks_is_searched_by_its_words_alone(team, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        coffee = memory_create(team=team, content="我喜欢在东京喝咖啡", people=[])
        memory_create(team=team, content="Coffee with Ana after the talk", people=[])
    hybrid = search(request=SearchRequest(team=team, query="咖啡", kind="memories", mode="hybrid", explain=True))
    assert [hit.id for hit in hybrid.results] == [coffee.pk]
    assert "semantic" not in hybrid.results[0].explanation["weights"] and "semantic" not in hybrid.candidates
    semantic = search(request=SearchRequest(team=team, query="咖啡", kind="memories", mode="semantic"))
    assert semantic.fallback == "recency"


@override_settings(EMBEDDINGS_ENABLED=False)
@pytest.mark.parametrize("mode", ["hybrid", "semantic"])
def test_with_the_model_off_an_unreadable_query_still_says_the_search_is_degraded(team, symbols, mode):
    response = search(request=SearchRequest(team=team, query="😀", mode=mode))
    assert response.degraded and "EMBEDDINGS_ENABLED" in response.degraded_reason
    assert response.fallback == "recency"


def test_the_model_reads_a_full_width_query_as_its_plain_letters(team, django_capture_on_commit_callbacks):
    # "ＲＥＡＣＴ hooks" (a CJK keyboard's Latin) was "[UNK] hooks" to the model: unrelated lessons first
    with django_capture_on_commit_callbacks(execute=True):
        react = lesson_create(team=team, title="React hooks run twice in development",
                              description="useEffect StrictMode", category="frontend")
        lesson_create(team=team, title="Keep business logic out of Django signals", description="signals hide calls",
                      category="backend")
        lesson_create(team=team, title="Stripe webhooks arrive twice", description="idempotency keys",
                      category="payments")
    for mode in ("semantic", "hybrid"):
        plain = search(request=SearchRequest(team=team, query="react hooks", mode=mode, limit=3, explain=True))
        wide = search(request=SearchRequest(team=team, query="ＲＥＡＣＴ　ｈｏｏｋｓ", mode=mode, limit=3, explain=True))
        assert wide.fallback is None and wide.results[0].id == react.id, mode
        assert [hit.explanation["similarity"] for hit in wide.results] == pytest.approx(
            [hit.explanation["similarity"] for hit in plain.results], abs=1e-4), mode


def test_a_row_written_in_full_width_is_found_by_meaning(team, django_capture_on_commit_callbacks):
    # the row's side of the same fault: stored as typed, "ＲＥＡＣＴ ｈｏｏｋｓ" was embedded as "[UNK] [UNK]"
    with django_capture_on_commit_callbacks(execute=True):
        wide = lesson_create(team=team, title="ＲＥＡＣＴ ｈｏｏｋｓ ｒｕｎ ｔｗｉｃｅ ｉｎ ｄｅｖｅｌｏｐｍｅｎｔ",
                             description="ｕｓｅＥｆｆｅｃｔ ＳｔｒｉｃｔＭｏｄｅ", category="frontend")
        lesson_create(team=team, title="Keep business logic out of Django signals", description="signals hide calls",
                      category="backend")
        lesson_create(team=team, title="Stripe webhooks arrive twice", description="idempotency keys",
                      category="payments")
    response = search(request=SearchRequest(team=team, query="effect hook fires two times", mode="semantic",
                                            limit=3, explain=True))
    assert response.fallback is None and response.results[0].id == wide.id
    assert response.results[0].explanation["similarity"] > 0.4
