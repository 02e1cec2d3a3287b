"""A query the model reads no word of ("😀", "→→"), with a `context` it does read (lessons/search/engine.py).

The query alone has no meaning to measure (encode.model_reads), but the caller's context does: before,
the context was dropped with the query, so semantic mode answered the recency fallback and hybrid mode
searched the query's symbols by their words alone. The contextual query (the query and the context's
keywords) is now encoded alone, as the one text with a meaning; only when it is unreadable too does the
search fall back as before."""

import pytest

from lessons.search import SearchRequest, search
from lessons.services.lessons import lesson_create

pytestmark = pytest.mark.django_db

EDITOR = """
useEffect(() => {
  const subscription = source.subscribe(render);
  return () => subscription.unsubscribe();
}, [source]);
"""


@pytest.fixture
def react(team, django_capture_on_commit_callbacks):
    """A lesson the editor's code is about, embedded with the real model, beside two it is not about."""
    with django_capture_on_commit_callbacks(execute=True):
        lesson = lesson_create(team=team, title="Clean up subscriptions in useEffect",
                               description="Return a cleanup function that unsubscribes, or the effect leaks.",
                               tags=["react"])
        lesson_create(team=team, title="Index the foreign keys", description="Joins on unindexed keys were slow.",
                      tags=["postgres"])
        lesson_create(team=team, title="Pin the Node version", description="CI and laptops ran different Nodes.",
                      tags=["ci"])
    return lesson


@pytest.mark.parametrize("query", ["😀", "∑", "→→"])
@pytest.mark.parametrize("mode", ["semantic", "hybrid"])
def test_an_unreadable_query_is_searched_by_the_meaning_of_its_context(team, react, query, mode):
    response = search(request=SearchRequest(team=team, query=query, context=EDITOR, mode=mode, explain=True))
    assert response.fallback is None and not response.degraded
    assert "semantic" in response.candidates and response.context_keywords
    best = response.results[0]
    assert best.id == react.pk
    assert best.explanation["similarity"] is not None and "semantic" in best.explanation["weights"]
    # one meaning measured: the contextual query's, not 0.6 of a missing primary's
    assert "contextual_similarity" not in best.explanation


def test_the_context_alone_ranks_as_the_contextual_query_alone(team, react):
    # the cosine is the one a readable search gives its contextual query ("😀" in it is one [UNK] piece)
    with_symbol = search(request=SearchRequest(team=team, query="😀", context=EDITOR, mode="semantic",
                                               explain=True))
    keywords = " ".join(with_symbol.context_keywords)
    as_query = search(request=SearchRequest(team=team, query=f"😀 {keywords}", mode="semantic", explain=True))
    assert [hit.id for hit in with_symbol.results] == [hit.id for hit in as_query.results]
    assert [hit.explanation["similarity"] for hit in with_symbol.results] == pytest.approx(
        [hit.explanation["similarity"] for hit in as_query.results], abs=1e-4)


@pytest.mark.parametrize("mode", ["semantic", "hybrid"])
def test_with_an_unreadable_context_too_the_search_falls_back_as_before(team, react, mode):
    response = search(request=SearchRequest(team=team, query="😀", context="🚀 → ✅ ①②", mode=mode))
    assert response.fallback == "recency"
    assert {hit.relevance for hit in response.results} == {"low"}
