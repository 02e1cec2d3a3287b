"""The semantic legs on a second connection (lessons/search/parallel.py), with the real model and
the demo lessons: the same answer as one connection, on another thread's connection outside a
transaction (committed rows, `transaction=True`), on the request's inside one, and a fallback when
the second connection fails. Each test loads the lessons itself: a transactional test's flush
would empty a module's shared team."""

import threading
from time import monotonic, sleep

import pytest
from django.db import OperationalError, connection, transaction
from django.test import override_settings

from lessons.search import SearchRequest, engine, search
from lessons.search.parallel import close_worker_connections, search_under_way
from lessons.services.embeddings import embedding_refresh
from lessons.services.lessons import lesson_create
from tests.search.demo import load_demo_team

QUERIES = ["database security", "webhook retries", "frontend state management", "nextjs", "how do I tune my guitar"]


def run(team, query, **options):
    return search(request=SearchRequest(team=team, query=query, explain=True, **options))


def answer(response):
    return [(hit.id, hit.score, hit.relevance, tuple(hit.found_by), hit.explanation) for hit in response.results]


@pytest.fixture
def demo_team(db):
    return load_demo_team(slug="demo-parallel", memories=False)


@pytest.fixture
def legs_threads(monkeypatch):
    """The thread each run of the semantic legs ran on (the legs themselves run for real)."""
    threads = []
    real = engine.semantic_legs

    def recording(**kwargs):
        threads.append(threading.current_thread().name)
        return real(**kwargs)

    monkeypatch.setattr(engine, "semantic_legs", recording)
    return threads


def backends_of_this_database() -> set[int]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT pid FROM pg_stat_activity WHERE datname = current_database()")
        return {pid for (pid,) in cursor.fetchall()}


def gone_within(pids: set[int], seconds: float = 10.0) -> bool:
    """PostgreSQL lists a backend until its process has exited, a moment after its client closed
    the connection (longer on a busy machine): wait for that, within a bound."""
    deadline = monotonic() + seconds
    while pids & backends_of_this_database():
        if monotonic() > deadline:
            return False
        sleep(0.02)
    return True


@pytest.mark.django_db(transaction=True)
def test_legs_beside_give_the_same_answer_as_one_connection(demo_team, legs_threads):
    for query in QUERIES:
        with override_settings(SEARCH_PARALLEL_LEGS=4):
            beside = run(demo_team, query, context="const { data } = supabase.from('notes').select()")
        with override_settings(SEARCH_PARALLEL_LEGS=0):
            after = run(demo_team, query, context="const { data } = supabase.from('notes').select()")
        assert answer(beside) == answer(after), query
        assert beside.candidates == after.candidates, query
    main = threading.current_thread().name
    assert all(thread.startswith("search-legs") for thread in legs_threads[0::2])
    assert legs_threads[1::2] == [main] * len(QUERIES)
    close_worker_connections()


@pytest.mark.django_db(transaction=True)
def test_worker_connections_close_on_request(demo_team, legs_threads):
    close_worker_connections()
    before = backends_of_this_database()  # a backend closed by an earlier test may still be listed
    with override_settings(SEARCH_PARALLEL_LEGS=1):
        assert run(demo_team, "database security").results
        assert legs_threads[-1].startswith("search-legs")
        worker = backends_of_this_database() - before
        assert len(worker) == 1  # the worker keeps its connection (CONN_MAX_AGE)
        assert run(demo_team, "webhook retries").results
        assert backends_of_this_database() - before == worker  # and uses it again
        close_worker_connections()
    assert gone_within(worker)


@pytest.mark.django_db(transaction=True)
def test_a_busy_process_runs_the_legs_after_statement_one(demo_team, legs_threads):
    """Another search under way in this process (as a concurrent request would be): under load the
    cores are busy already, and a second connection per search only costs."""
    main = threading.current_thread().name
    with override_settings(SEARCH_PARALLEL_LEGS=1):
        with search_under_way():
            busy = run(demo_team, "database security")
        alone = run(demo_team, "database security")
        with override_settings(SEARCH_PARALLEL_LEGS=2), search_under_way():
            two_allowed = run(demo_team, "database security")
    assert legs_threads[0] == main
    assert legs_threads[1].startswith("search-legs") and legs_threads[2].startswith("search-legs")
    assert answer(busy) == answer(alone) == answer(two_allowed)
    close_worker_connections()


@pytest.mark.django_db
def test_inside_a_transaction_the_legs_see_its_uncommitted_rows(demo_team, legs_threads):
    """Every TestCase is a transaction: another connection could not see the lesson made here."""
    assert connection.in_atomic_block
    with override_settings(SEARCH_PARALLEL_LEGS=4):
        lesson = lesson_create(team=demo_team, title="Quokka habitats on Rottnest Island",
                               description="Where quokkas shelter during the hottest summer days.")
        embedding_refresh(items=[lesson])
        response = run(demo_team, "where small marsupials hide from the heat")
    assert legs_threads == [threading.current_thread().name]
    hit = next(hit for hit in response.results if hit.id == lesson.pk)
    assert "semantic" in hit.explanation["legs"]


@pytest.mark.django_db(transaction=True)
def test_a_failing_second_connection_falls_back_to_the_request_connection(demo_team, monkeypatch, caplog):
    real = engine.semantic_legs

    def refused_beside(**kwargs):
        if threading.current_thread().name.startswith("search-legs"):
            raise OperationalError("FATAL: sorry, too many clients already")
        return real(**kwargs)

    monkeypatch.setattr(engine, "semantic_legs", refused_beside)
    with override_settings(SEARCH_PARALLEL_LEGS=4):
        response = run(demo_team, "database security")
    assert not response.degraded and response.results
    assert any("semantic" in hit.explanation["legs"] for hit in response.results)
    assert "second connection failed" in caplog.text
    with override_settings(SEARCH_PARALLEL_LEGS=0), transaction.atomic():
        assert answer(run(demo_team, "database security")) == answer(response)
    close_worker_connections()
