"""Questions about one person's memories, with the real model: each kind has its own span of query
lengths over which the weights move from meaning to words (settings.SEARCH_QUERY_LENGTH_SPAN)."""

import pytest
from django.conf import settings
from django.test import override_settings

from lessons.search import SearchRequest, search

pytestmark = pytest.mark.django_db

# Written from the demo memories' content, one answering memory each, the way an agent asks about a
# conversation it took part in (a name, an event, a thing).
QUESTIONS = (
    ("Where did I meet Maria?", "memory-0001"),
    ("What drink does Maria like?", "memory-0010"),
    ("Where did Tom and I go on a climbing trip?", "memory-0050"),
    ("What instrument does Mateo play?", "memory-0015"),
    ("Which company did I join after the Tidewater interview?", "memory-0046"),
    ("When is Jonas's birthday?", "memory-0026"),
    ("What is Priya allergic to?", "memory-0055"),
    ("Where did Lena get married?", "memory-0064"),
    ("What did I name my sourdough starter?", "memory-0012"),
    ("Where does Nonna Rosa live?", "memory-0003"),
    ("What did Felix win at the science fair?", "memory-0115"),
    ("Which camera did I buy at the flea market?", "memory-0028"),
    ("Where did Sam move for his new job?", "memory-0035"),
    ("What was my first meetup talk about?", "memory-0070"),
    ("How long was the routing API down during the incident?", "memory-0085"),
    ("What happened to Grandma Rosa in her kitchen?", "memory-0042"),
)


def weights_of(team, query, kind):
    response = search(request=SearchRequest(team=team, query=query, kind=kind, limit=1, explain=True))
    return response.results[0].explanation["weights"]


def reciprocal_ranks(team, mode):
    ranks = []
    for question, answer in QUESTIONS:
        response = search(request=SearchRequest(team=team, query=question, kind="memories", mode=mode, limit=10))
        found = [hit.external_id for hit in response.results]
        ranks.append(1.0 / (found.index(answer) + 1) if answer in found else 0.0)
    return ranks


def test_a_four_term_memory_question_leans_on_words_a_lesson_query_does_not_yet(demo_team):
    # "Which camera did I buy at the flea market?": camera, buy, flea, market.
    long = settings.SEARCH_WEIGHTS_LONG
    memory = weights_of(demo_team, "Which camera did I buy at the flea market?", "memories")
    assert memory == pytest.approx(long, abs=1e-4)
    # The same four terms on lessons sit a third of the way along (2, 8).
    lesson = weights_of(demo_team, "camera buy flea market", "lessons")
    assert lesson["semantic"] == pytest.approx(0.6 + (0.3 - 0.6) / 3, abs=1e-4)
    assert lesson["semantic"] > memory["semantic"]


def test_the_span_is_a_setting_per_kind(demo_team):
    question = "Which camera did I buy at the flea market?"
    with override_settings(SEARCH_QUERY_LENGTH_SPAN={"lessons": (2, 8), "memories": (2, 8)}):
        assert weights_of(demo_team, question, "memories")["semantic"] == pytest.approx(0.5, abs=1e-4)
    with override_settings(SEARCH_QUERY_LENGTH_SPAN={"lessons": (2, 4), "memories": (2, 8)}):
        assert weights_of(demo_team, "camera buy flea market", "lessons")["semantic"] == pytest.approx(0.3, abs=1e-4)


def test_the_hybrid_answers_questions_about_memories_at_least_as_well_as_each_leg(demo_team):
    hybrid, text, semantic = (reciprocal_ranks(demo_team, mode) for mode in ("hybrid", "text", "semantic"))
    mrr = {name: sum(ranks) / len(ranks)
           for name, ranks in (("hybrid", hybrid), ("text", text), ("semantic", semantic))}
    assert mrr["hybrid"] >= max(mrr["text"], mrr["semantic"]), mrr
    assert sum(rank == 1.0 for rank in hybrid) >= 12, hybrid  # the answer first for 3 questions in 4
