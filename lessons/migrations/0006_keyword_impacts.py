"""The keyword index at scale: impact-ordered postings, stored document frequencies, sharded counters.

- `lessons_keyword_posting.impact`: each posting's BM25 term-frequency factor,
  tf / (tf + k1 * (1 - b + b * len / avglen)), with the field weights, k1, b and average length of
  its team's row in `lessons_keyword_reference`. The index on (kind, team, lexeme, impact DESC)
  lets the keyword leg read a term's best postings first and stop (lessons/search/keyword.py).
- `lessons_keyword_df`: each term's document frequency, so idf no longer counts a posting list.
- `lessons_keyword_stats` and `lessons_keyword_df` are sharded by the writing session
  (pg_backend_pid() % 16): concurrent inserts into one team no longer queue on one row. Readers sum
  the shards; a shard may go negative after deletes, the sum is what counts.
- `lessons_keyword_refresh_impacts(kind, team, k1, b, w_a, w_b, w_c, w_d)` recomputes a team's
  impacts with its current average length (manage.py refresh_keyword_impacts). Writers hold a shared
  advisory lock per team while they write postings, the refresh an exclusive one, so every posting
  of a team always carries impacts of the same reference.
"""

from django.db import migrations

FORWARD_SQL = r"""
CREATE TABLE lessons_keyword_reference (
    kind    "char" NOT NULL,
    team_id bigint NOT NULL,
    avglen  float8 NOT NULL,
    k1 float8 NOT NULL, b float8 NOT NULL,
    w_a float8 NOT NULL, w_b float8 NOT NULL, w_c float8 NOT NULL, w_d float8 NOT NULL,
    refreshed_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (kind, team_id)
);

CREATE TABLE lessons_keyword_df (
    kind    "char"   NOT NULL,
    team_id bigint   NOT NULL,
    lexeme  text     NOT NULL,
    shard   smallint NOT NULL,
    df      bigint   NOT NULL,
    PRIMARY KEY (kind, team_id, lexeme, shard)
);

ALTER TABLE lessons_keyword_stats ADD COLUMN shard smallint NOT NULL DEFAULT 0;
ALTER TABLE lessons_keyword_stats DROP CONSTRAINT lessons_keyword_stats_pkey;
ALTER TABLE lessons_keyword_stats ADD PRIMARY KEY (kind, team_id, shard);

ALTER TABLE lessons_keyword_posting ADD COLUMN impact real NOT NULL DEFAULT 0;

-- The defaults of lessons/search/keyword.py (DEFAULT_BM25); a team's first row sets its length.
CREATE FUNCTION lessons_keyword_impact(ref lessons_keyword_reference, tf_a integer, tf_b integer, tf_c integer,
                                       tf_d integer, len_a integer, len_b integer, len_c integer, len_d integer)
RETURNS real LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT (tfw / nullif(tfw + ref.k1 * (1 - ref.b + ref.b * lenw / ref.avglen), 0))::real
      FROM (SELECT ref.w_a * tf_a + ref.w_b * tf_b + ref.w_c * tf_c + ref.w_d * tf_d AS tfw,
                   ref.w_a * len_a + ref.w_b * len_b + ref.w_c * len_c + ref.w_d * len_d AS lenw) AS x
$$;

CREATE FUNCTION lessons_keyword_team_lock(p_kind "char", p_team bigint) RETURNS bigint
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT hashtextextended('lessons_keyword:' || p_kind::text || ':' || p_team::text, 0)
$$;

CREATE TYPE lessons_keyword_row AS (id bigint, team_id bigint, vector tsvector);

CREATE FUNCTION lessons_keyword_lengths(vector tsvector)
RETURNS TABLE (la integer, lb integer, lc integer, ld integer)
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT coalesce(sum(t.tf_a), 0)::integer, coalesce(sum(t.tf_b), 0)::integer,
           coalesce(sum(t.tf_c), 0)::integer, coalesce(sum(t.tf_d), 0)::integer
      FROM lessons_keyword_terms(vector) AS t
$$;

-- One call per statement (a COPY of 100,000 rows included): rows leave the index, rows enter it.
-- Set-based, so each term's df and each team's counters change once per statement, not once per
-- row: updating one row 100,000 times in a transaction walks an ever longer chain of versions.
CREATE FUNCTION lessons_keyword_apply(p_kind "char", p_removed lessons_keyword_row[], p_added lessons_keyword_row[])
RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    my_shard smallint := pg_backend_pid() % 16;
    each_team bigint;
BEGIN
    FOR each_team IN
        SELECT DISTINCT r.team_id FROM (SELECT team_id FROM unnest(p_removed)
                                        UNION SELECT team_id FROM unnest(p_added)) AS r ORDER BY 1
    LOOP
        -- A refresh of the team's impacts waits for writers, and writers for it (keyword_impacts_refresh).
        PERFORM pg_advisory_xact_lock_shared(lessons_keyword_team_lock(p_kind, each_team));
        -- Two sessions sharing a shard take turns for the whole transaction: a multi-statement
        -- transaction would otherwise lock df rows in its own order and could deadlock with another.
        PERFORM pg_advisory_xact_lock(
            hashtextextended('lessons_keyword_shard:' || p_kind::text || ':' || each_team::text || ':' || my_shard::text, 0));
    END LOOP;

    IF cardinality(p_removed) > 0 THEN
        WITH gone AS (
            DELETE FROM lessons_keyword_posting AS p USING unnest(p_removed) AS r
             WHERE p.kind = p_kind AND p.row_id = r.id
            RETURNING p.team_id, p.lexeme
        )
        INSERT INTO lessons_keyword_df AS d (kind, team_id, lexeme, shard, df)
        SELECT p_kind, gone.team_id, gone.lexeme, my_shard, -count(*) FROM gone
         GROUP BY gone.team_id, gone.lexeme ORDER BY gone.team_id, gone.lexeme
        ON CONFLICT (kind, team_id, lexeme, shard) DO UPDATE SET df = d.df + EXCLUDED.df;

        INSERT INTO lessons_keyword_stats AS s (kind, team_id, shard, doc_count, len_a, len_b, len_c, len_d)
        SELECT p_kind, r.team_id, my_shard, -count(*), -sum(l.la), -sum(l.lb), -sum(l.lc), -sum(l.ld)
          FROM unnest(p_removed) AS r CROSS JOIN LATERAL lessons_keyword_lengths(r.vector) AS l
         GROUP BY r.team_id ORDER BY r.team_id
        ON CONFLICT (kind, team_id, shard) DO UPDATE
           SET doc_count = s.doc_count + EXCLUDED.doc_count,
               len_a = s.len_a + EXCLUDED.len_a, len_b = s.len_b + EXCLUDED.len_b,
               len_c = s.len_c + EXCLUDED.len_c, len_d = s.len_d + EXCLUDED.len_d;
    END IF;

    IF cardinality(p_added) > 0 THEN
        -- A team's first rows set its reference length (the defaults of lessons/search/keyword.py).
        INSERT INTO lessons_keyword_reference (kind, team_id, avglen, k1, b, w_a, w_b, w_c, w_d)
        SELECT p_kind, a.team_id, greatest(avg(1.5 * l.la + l.lb + 0.5 * l.lc + l.ld), 1), 1.2, 0.5, 1.5, 1.0, 0.5, 1.0
          FROM unnest(p_added) AS a CROSS JOIN LATERAL lessons_keyword_lengths(a.vector) AS l
         WHERE NOT EXISTS (SELECT 1 FROM lessons_keyword_reference AS r WHERE r.kind = p_kind AND r.team_id = a.team_id)
         GROUP BY a.team_id
        ON CONFLICT DO NOTHING;

        WITH terms AS MATERIALIZED (
            SELECT a.id, a.team_id, t.lexeme, t.tf_a, t.tf_b, t.tf_c, t.tf_d
              FROM unnest(p_added) AS a CROSS JOIN LATERAL lessons_keyword_terms(a.vector) AS t
        ), lengths AS MATERIALIZED (
            SELECT a.id, a.team_id, coalesce(sum(t.tf_a), 0)::integer AS la, coalesce(sum(t.tf_b), 0)::integer AS lb,
                   coalesce(sum(t.tf_c), 0)::integer AS lc, coalesce(sum(t.tf_d), 0)::integer AS ld
              FROM unnest(p_added) AS a LEFT JOIN terms AS t ON t.id = a.id
             GROUP BY a.id, a.team_id
        ), posted AS (
            INSERT INTO lessons_keyword_posting
                   (kind, team_id, row_id, lexeme, tf_a, tf_b, tf_c, tf_d, len_a, len_b, len_c, len_d, impact)
            SELECT p_kind, t.team_id, t.id, t.lexeme, t.tf_a, t.tf_b, t.tf_c, t.tf_d, l.la, l.lb, l.lc, l.ld,
                   lessons_keyword_impact(r, t.tf_a, t.tf_b, t.tf_c, t.tf_d, l.la, l.lb, l.lc, l.ld)
              FROM terms AS t JOIN lengths AS l ON l.id = t.id
              JOIN lessons_keyword_reference AS r ON r.kind = p_kind AND r.team_id = t.team_id
        ), counted AS (
            INSERT INTO lessons_keyword_df AS d (kind, team_id, lexeme, shard, df)
            SELECT p_kind, terms.team_id, terms.lexeme, my_shard, count(*) FROM terms
             GROUP BY terms.team_id, terms.lexeme ORDER BY terms.team_id, terms.lexeme
            ON CONFLICT (kind, team_id, lexeme, shard) DO UPDATE SET df = d.df + EXCLUDED.df
        )
        INSERT INTO lessons_keyword_stats AS s (kind, team_id, shard, doc_count, len_a, len_b, len_c, len_d)
        SELECT p_kind, lengths.team_id, my_shard, count(*), sum(la), sum(lb), sum(lc), sum(ld) FROM lengths
         GROUP BY lengths.team_id ORDER BY lengths.team_id
        ON CONFLICT (kind, team_id, shard) DO UPDATE
           SET doc_count = s.doc_count + EXCLUDED.doc_count,
               len_a = s.len_a + EXCLUDED.len_a, len_b = s.len_b + EXCLUDED.len_b,
               len_c = s.len_c + EXCLUDED.len_c, len_d = s.len_d + EXCLUDED.len_d;
    END IF;
END $$;

CREATE FUNCTION lessons_keyword_on_insert() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM lessons_keyword_apply(TG_ARGV[0]::"char", '{}',
        (SELECT coalesce(array_agg(ROW(n.id, n.team_id, n.search_vector)::lessons_keyword_row), '{}') FROM new_rows AS n));
    RETURN NULL;
END $$;

CREATE FUNCTION lessons_keyword_on_delete() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM lessons_keyword_apply(TG_ARGV[0]::"char",
        (SELECT coalesce(array_agg(ROW(o.id, o.team_id, o.search_vector)::lessons_keyword_row), '{}') FROM old_rows AS o), '{}');
    RETURN NULL;
END $$;

-- Updates stay row by row (with 0002's WHEN: only a changed vector or team): most updates touch
-- counters or embeddings, and a statement trigger would copy every updated row to find none.
CREATE OR REPLACE FUNCTION lessons_keyword_sync() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM lessons_keyword_apply(TG_ARGV[0]::"char",
        ARRAY[ROW(OLD.id, OLD.team_id, OLD.search_vector)::lessons_keyword_row],
        ARRAY[ROW(NEW.id, NEW.team_id, NEW.search_vector)::lessons_keyword_row]);
    RETURN NULL;
END $$;

DROP TRIGGER lessons_lesson_keyword_insert_delete ON lessons_lesson;
DROP TRIGGER lessons_memory_keyword_insert_delete ON lessons_memory;
CREATE TRIGGER lessons_lesson_keyword_insert AFTER INSERT ON lessons_lesson
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION lessons_keyword_on_insert('l');
CREATE TRIGGER lessons_lesson_keyword_delete AFTER DELETE ON lessons_lesson
    REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION lessons_keyword_on_delete('l');
CREATE TRIGGER lessons_memory_keyword_insert AFTER INSERT ON lessons_memory
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION lessons_keyword_on_insert('m');
CREATE TRIGGER lessons_memory_keyword_delete AFTER DELETE ON lessons_memory
    REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION lessons_keyword_on_delete('m');
DROP FUNCTION lessons_keyword_index_row("char", bigint, bigint, tsvector, integer);

CREATE FUNCTION lessons_keyword_refresh_impacts(p_kind "char", p_team bigint, p_k1 float8, p_b float8,
                                                p_w_a float8, p_w_b float8, p_w_c float8, p_w_d float8)
RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
    ref lessons_keyword_reference;
    updated bigint;
BEGIN
    PERFORM pg_advisory_xact_lock(lessons_keyword_team_lock(p_kind, p_team));
    INSERT INTO lessons_keyword_reference AS r (kind, team_id, avglen, k1, b, w_a, w_b, w_c, w_d, refreshed_at)
    SELECT p_kind, p_team,
           greatest(coalesce((p_w_a * sum(len_a) + p_w_b * sum(len_b) + p_w_c * sum(len_c) + p_w_d * sum(len_d))
                             / nullif(sum(doc_count), 0), 1), 1e-9),
           p_k1, p_b, p_w_a, p_w_b, p_w_c, p_w_d, now()
      FROM lessons_keyword_stats WHERE kind = p_kind AND team_id = p_team
    ON CONFLICT (kind, team_id) DO UPDATE
       SET avglen = EXCLUDED.avglen, k1 = EXCLUDED.k1, b = EXCLUDED.b, w_a = EXCLUDED.w_a, w_b = EXCLUDED.w_b,
           w_c = EXCLUDED.w_c, w_d = EXCLUDED.w_d, refreshed_at = EXCLUDED.refreshed_at;
    SELECT * INTO ref FROM lessons_keyword_reference WHERE kind = p_kind AND team_id = p_team;
    UPDATE lessons_keyword_posting AS p
       SET impact = lessons_keyword_impact(ref, p.tf_a, p.tf_b, p.tf_c, p.tf_d, p.len_a, p.len_b, p.len_c, p.len_d)
     WHERE p.kind = p_kind AND p.team_id = p_team;
    GET DIAGNOSTICS updated = ROW_COUNT;
    RETURN updated;
END $$;

-- Rows that existed before this migration: document frequencies, then each team's reference.
INSERT INTO lessons_keyword_df (kind, team_id, lexeme, shard, df)
SELECT kind, team_id, lexeme, 0, count(*) FROM lessons_keyword_posting GROUP BY kind, team_id, lexeme;
SELECT lessons_keyword_refresh_impacts(kind, team_id, 1.2, 0.5, 1.5, 1.0, 0.5, 1.0)
  FROM (SELECT DISTINCT kind, team_id FROM lessons_keyword_stats) AS teams;

-- Read a term's postings best first; the same prefix serves whole-list scans.
CREATE INDEX lessons_keyword_posting_impact
    ON lessons_keyword_posting (kind, team_id, lexeme, impact DESC)
    INCLUDE (row_id, tf_a, tf_b, tf_c, tf_d, len_a, len_b, len_c, len_d);
DROP INDEX lessons_keyword_posting_lookup;
"""

REVERSE_SQL = r"""
CREATE INDEX lessons_keyword_posting_lookup
    ON lessons_keyword_posting (kind, team_id, lexeme)
    INCLUDE (row_id, tf_a, tf_b, tf_c, tf_d, len_a, len_b, len_c, len_d);
DROP INDEX lessons_keyword_posting_impact;
DROP FUNCTION lessons_keyword_refresh_impacts("char", bigint, float8, float8, float8, float8, float8, float8);
DROP TRIGGER lessons_lesson_keyword_insert ON lessons_lesson;
DROP TRIGGER lessons_lesson_keyword_delete ON lessons_lesson;
DROP TRIGGER lessons_memory_keyword_insert ON lessons_memory;
DROP TRIGGER lessons_memory_keyword_delete ON lessons_memory;
DROP FUNCTION lessons_keyword_on_insert();
DROP FUNCTION lessons_keyword_on_delete();
DROP FUNCTION lessons_keyword_apply("char", lessons_keyword_row[], lessons_keyword_row[]);
DROP FUNCTION lessons_keyword_lengths(tsvector);
CREATE FUNCTION lessons_keyword_index_row(p_kind "char", p_team bigint, p_row bigint, p_vector tsvector, p_sign integer)
RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    la integer; lb integer; lc integer; ld integer;
BEGIN
    SELECT coalesce(sum(tf_a), 0), coalesce(sum(tf_b), 0), coalesce(sum(tf_c), 0), coalesce(sum(tf_d), 0)
      INTO la, lb, lc, ld
      FROM lessons_keyword_terms(p_vector);
    IF p_sign > 0 THEN
        INSERT INTO lessons_keyword_posting
        SELECT p_kind, p_team, p_row, t.lexeme, t.tf_a, t.tf_b, t.tf_c, t.tf_d, la, lb, lc, ld
          FROM lessons_keyword_terms(p_vector) AS t;
    ELSE
        DELETE FROM lessons_keyword_posting WHERE kind = p_kind AND row_id = p_row;
    END IF;
    INSERT INTO lessons_keyword_stats AS s (kind, team_id, doc_count, len_a, len_b, len_c, len_d)
    VALUES (p_kind, p_team, p_sign, p_sign * la, p_sign * lb, p_sign * lc, p_sign * ld)
    ON CONFLICT (kind, team_id) DO UPDATE
       SET doc_count = s.doc_count + EXCLUDED.doc_count,
           len_a = s.len_a + EXCLUDED.len_a, len_b = s.len_b + EXCLUDED.len_b,
           len_c = s.len_c + EXCLUDED.len_c, len_d = s.len_d + EXCLUDED.len_d;
END $$;
CREATE OR REPLACE FUNCTION lessons_keyword_sync() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    row_kind "char" := TG_ARGV[0];
BEGIN
    IF TG_OP IN ('UPDATE', 'DELETE') THEN
        PERFORM lessons_keyword_index_row(row_kind, OLD.team_id, OLD.id, OLD.search_vector, -1);
    END IF;
    IF TG_OP IN ('UPDATE', 'INSERT') THEN
        PERFORM lessons_keyword_index_row(row_kind, NEW.team_id, NEW.id, NEW.search_vector, 1);
    END IF;
    RETURN NULL;
END $$;
CREATE TRIGGER lessons_lesson_keyword_insert_delete AFTER INSERT OR DELETE ON lessons_lesson
    FOR EACH ROW EXECUTE FUNCTION lessons_keyword_sync('l');
CREATE TRIGGER lessons_memory_keyword_insert_delete AFTER INSERT OR DELETE ON lessons_memory
    FOR EACH ROW EXECUTE FUNCTION lessons_keyword_sync('m');
DROP TYPE lessons_keyword_row;
DROP FUNCTION lessons_keyword_team_lock("char", bigint);
DROP FUNCTION lessons_keyword_impact(lessons_keyword_reference, integer, integer, integer, integer,
                                     integer, integer, integer, integer);
ALTER TABLE lessons_keyword_posting DROP COLUMN impact;
-- Fold the shards back into one row per team.
CREATE TEMP TABLE folded AS
SELECT kind, team_id, sum(doc_count) AS doc_count, sum(len_a) AS len_a, sum(len_b) AS len_b,
       sum(len_c) AS len_c, sum(len_d) AS len_d FROM lessons_keyword_stats GROUP BY kind, team_id;
DELETE FROM lessons_keyword_stats;
ALTER TABLE lessons_keyword_stats DROP CONSTRAINT lessons_keyword_stats_pkey;
ALTER TABLE lessons_keyword_stats DROP COLUMN shard;
ALTER TABLE lessons_keyword_stats ADD PRIMARY KEY (kind, team_id);
INSERT INTO lessons_keyword_stats (kind, team_id, doc_count, len_a, len_b, len_c, len_d)
SELECT kind, team_id, doc_count, len_a, len_b, len_c, len_d FROM folded;
DROP TABLE folded;
DROP TABLE lessons_keyword_df;
DROP TABLE lessons_keyword_reference;
"""


class Migration(migrations.Migration):
    dependencies = [("lessons", "0005_console_b_curation")]

    operations = [migrations.RunSQL(FORWARD_SQL, reverse_sql=REVERSE_SQL)]
