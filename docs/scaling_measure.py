"""The measurements behind docs/scaling.md: sizes on disk, HNSW build time, `vector` vs `halfvec`.

Run after `bench_search --embed-sample` has built a large team (it reads that team, writes only a
scratch table that it drops at the end):

    DJANGO_DEBUG=1 .venv/bin/python manage.py shell -c \
        "exec(open('docs/scaling_measure.py').read()); measure(team_slug='scale-bench', rows=100_000)"

1. Sizes of lessons_lesson (heap + TOAST), each of its indexes, and the keyword postings, divided
   by the number of lessons in the database (all of them are the bench team's when run on a
   bench-only database).
2. On a scratch copy of `rows` of the team's vectors: CREATE INDEX ... USING hnsw (m 16,
   ef_construction 64, as the model declares) on `vector` and on `(embedding::halfvec(384))`,
   timed, with the server's maintenance_work_mem and with 1GB.
3. Recall@10 of each index against the exact order (a sequential scan) for 50 real query
   encodings, at hnsw.ef_search 100 (the project's default) and 400, with the similarity the
   approximate answers lose, and the latency of each; then recall on the real table's index.
"""

import random
import statistics
from time import perf_counter

from django.db import connection

MB = 1024 * 1024


def _one(cursor, sql, params=()):
    cursor.execute(sql, params)
    return cursor.fetchone()


def sizes(cursor) -> None:
    lessons = _one(cursor, "SELECT count(*) FROM lessons_lesson")[0]
    postings = _one(cursor, "SELECT count(*) FROM lessons_keyword_posting WHERE kind = 'l'")[0]
    print(f"lessons in the database: {lessons:,}; keyword postings of lessons: {postings:,} "
          f"({postings / lessons:.1f} a lesson)")
    cursor.execute(
        """
        SELECT 'lessons_lesson heap+TOAST', pg_table_size('lessons_lesson')
        UNION ALL
        SELECT '  index ' || indexrelname, pg_relation_size(indexrelid)
          FROM pg_stat_user_indexes WHERE relname = 'lessons_lesson'
        UNION ALL
        SELECT 'lessons_keyword_posting heap', pg_table_size('lessons_keyword_posting')
        UNION ALL
        SELECT '  index ' || indexrelname, pg_relation_size(indexrelid)
          FROM pg_stat_user_indexes WHERE relname = 'lessons_keyword_posting'
        """
    )
    print(f"{'relation':<58}{'MB':>10}{'MB per 100k lessons':>22}")
    for name, size in cursor.fetchall():
        print(f"{name:<58}{size / MB:>10.1f}{size / MB * 100_000 / lessons:>22.1f}")


def posting_lists(cursor, *, team_id: int) -> None:
    """How long the keyword index's lists are. Each synthetic title carries its own number (one
    list of one row each); the words come from a small vocabulary, so their lists are long."""
    cursor.execute(
        """
        SELECT count(*), count(*) FILTER (WHERE df >= rows / 100),
               percentile_cont(0.5) WITHIN GROUP (ORDER BY df) FILTER (WHERE df >= rows / 100), max(df)
          FROM (SELECT lexeme, count(*) AS df, max(rows) AS rows
                  FROM lessons_keyword_posting,
                       (SELECT count(*) AS rows FROM lessons_lesson WHERE team_id = %s) AS team
                 WHERE kind = 'l' AND team_id = %s GROUP BY lexeme) AS lists
        """,
        [team_id, team_id],
    )
    lexemes, common, median, longest = cursor.fetchone()
    print(f"\nkeyword index of the team: {lexemes:,} distinct lexemes; {common:,} of them in at least 1% of "
          f"the lessons, median list {median:,.0f} rows; longest {longest:,}")


def build_times(cursor, *, team_id: int, rows: int) -> None:
    cursor.execute("DROP TABLE IF EXISTS scaling_scratch")
    cursor.execute(
        "CREATE TABLE scaling_scratch AS SELECT id, embedding FROM lessons_lesson "
        "WHERE team_id = %s AND embedding IS NOT NULL ORDER BY id LIMIT %s",
        [team_id, rows],
    )
    cursor.execute("VACUUM ANALYZE scaling_scratch")
    default_mwm = _one(cursor, "SHOW maintenance_work_mem")[0]
    workers = _one(cursor, "SHOW max_parallel_maintenance_workers")[0]
    print(f"\nHNSW builds on {rows:,} vectors (m 16, ef_construction 64; "
          f"max_parallel_maintenance_workers {workers}, 2 cores shared with other work)")
    variants = [
        ("vector", "embedding vector_cosine_ops", default_mwm),
        ("vector", "embedding vector_cosine_ops", "1GB"),
        ("halfvec", "(embedding::halfvec(384)) halfvec_cosine_ops", "1GB"),
    ]
    for kind, expression, mwm in variants:
        name = f"scaling_scratch_{kind}"
        cursor.execute(f"DROP INDEX IF EXISTS {name}")
        cursor.execute(f"SET maintenance_work_mem = '{mwm}'")
        started = perf_counter()
        cursor.execute(
            f"CREATE INDEX {name} ON scaling_scratch USING hnsw ({expression}) WITH (m = 16, ef_construction = 64)"
        )
        seconds = perf_counter() - started
        size = _one(cursor, "SELECT pg_relation_size(%s::regclass)", [name])[0]
        print(f"  {kind:<8} maintenance_work_mem {mwm:<6} build {seconds:6.1f} s   size {size / MB:7.1f} MB")
    cursor.execute("RESET maintenance_work_mem")


def recall(cursor, *, queries: int = 50, k: int = 10, ef_searches: tuple[int, ...] = (100, 400)) -> None:
    """Recall@k of each index against the exact order, and how much similarity the approximate top
    k loses on average: on this synthetic data each sample has many near-duplicates (its nearby
    rows), so the exact top k are near-ties and recall alone understates the answers' quality."""
    from lessons.embedding import get_embedding_backend
    from lessons.management.commands.bench_search import PLACES, QUERIES, TOPICS

    rng = random.Random(11)
    texts = list(QUERIES) + [f"{topic} {rng.choice(PLACES)}" for topic, _, _ in TOPICS]
    texts = (texts * 2)[:queries] if len(texts) < queries else texts[:queries]
    vectors = get_embedding_backend().embed_queries(texts)
    literals = ["[" + ",".join(f"{x:.7g}" for x in v) + "]" for v in vectors]
    distances = {
        "exact": "embedding <=> %s::vector",
        "vector": "embedding <=> %s::vector",
        "halfvec": "embedding::halfvec(384) <=> %s::halfvec(384)",
    }

    def run(name: str) -> tuple[list[list[tuple[int, float]]], list[float]]:
        found, timings = [], []
        for literal in literals:
            started = perf_counter()
            # Similarity always on the full vectors, whichever index ordered the rows.
            cursor.execute(
                f"SELECT id, 1 - (embedding <=> %s::vector) FROM scaling_scratch ORDER BY {distances[name]} LIMIT {k}",
                [literal, literal],
            )
            found.append(cursor.fetchall())
            timings.append((perf_counter() - started) * 1000)
        return found, timings

    cursor.execute("SET enable_indexscan = off; SET enable_seqscan = on")
    exact, exact_ms = run("exact")
    print(f"\nrecall@{k} against the exact order (a sequential scan, p50 {statistics.median(exact_ms):.1f} ms), "
          f"{len(literals)} real query encodings")
    spread = statistics.median(rows[0][1] - rows[-1][1] for rows in exact)
    print(f"  exact top 1 minus top {k} similarity: median {spread:.4f} (the top {k} are near-ties)")
    cursor.execute("SET enable_indexscan = on; SET enable_seqscan = off")
    for ef_search in ef_searches:
        cursor.execute(f"SET hnsw.ef_search = {ef_search}")
        for name, other in (("vector", "halfvec"), ("halfvec", "vector")):
            cursor.execute("BEGIN")
            cursor.execute(f"DROP INDEX scaling_scratch_{other}")  # only the index under test may serve
            plan = "\n".join(row[0] for row in _explain(cursor, distances[name], literals[0], k))
            assert f"scaling_scratch_{name}" in plan, plan
            found, timings = run(name)
            cursor.execute("ROLLBACK")
            hits = [len({i for i, _ in a} & {i for i, _ in b}) / k for a, b in zip(found, exact)]
            lost = [statistics.mean(s for _, s in b) - statistics.mean(s for _, s in a) for a, b in zip(found, exact)]
            print(f"  {name:<8} ef_search {ef_search:<4} recall {statistics.mean(hits):.3f} (min {min(hits):.1f})  "
                  f"similarity lost: mean {statistics.mean(lost):.4f}, worst {max(lost):.4f}  "
                  f"p50 {statistics.median(timings):5.1f} ms")
    cursor.execute("RESET enable_indexscan; RESET enable_seqscan; RESET hnsw.ef_search")


def table_recall(cursor, *, team_id: int, queries: int = 40, k: int = 10, ef_searches=(100, 1000)) -> None:
    """The same check on the real table and its real index, shaped like the semantic leg (team
    filter, iterative scan)."""
    from lessons.embedding import get_embedding_backend
    from lessons.management.commands.bench_search import PLACES, QUERIES, TOPICS

    rng = random.Random(11)
    texts = (list(QUERIES) + [f"{topic} {rng.choice(PLACES)}" for topic, _, _ in TOPICS])[:queries]
    literals = ["[" + ",".join(f"{x:.7g}" for x in v) + "]" for v in get_embedding_backend().embed_queries(texts)]
    sql = (
        "SELECT id FROM lessons_lesson WHERE team_id = %s AND embedding IS NOT NULL "
        f"ORDER BY embedding <=> %s::vector LIMIT {k}"
    )

    def run() -> list[set[int]]:
        found = []
        for literal in literals:
            cursor.execute(sql, [team_id, literal])
            found.append({row[0] for row in cursor.fetchall()})
        return found

    cursor.execute("SET enable_indexscan = off; SET enable_bitmapscan = off")
    exact = run()
    cursor.execute("RESET enable_indexscan; RESET enable_bitmapscan; SET enable_seqscan = off")
    cursor.execute("SET hnsw.iterative_scan = relaxed_order")
    print(f"\nthe real table's HNSW index, team filter, {len(literals)} queries:")
    for ef_search in ef_searches:
        cursor.execute(f"SET hnsw.ef_search = {ef_search}")
        hits = [len(a & b) / k for a, b in zip(run(), exact)]
        print(f"  ef_search {ef_search:<5} recall@{k} {statistics.mean(hits):.3f}")
    cursor.execute("RESET enable_seqscan; RESET hnsw.iterative_scan; RESET hnsw.ef_search")


def _explain(cursor, order, literal, k):
    cursor.execute(f"EXPLAIN SELECT id FROM scaling_scratch ORDER BY {order} LIMIT {k}", [literal])
    return cursor.fetchall()


def measure(*, team_slug: str, rows: int = 100_000) -> None:
    from lessons.models import Team

    team = Team.objects.get(slug=team_slug)
    with connection.cursor() as cursor:
        sizes(cursor)
        posting_lists(cursor, team_id=team.pk)
        build_times(cursor, team_id=team.pk, rows=rows)
        recall(cursor)
        cursor.execute("DROP TABLE scaling_scratch")
        table_recall(cursor, team_id=team.pk)
