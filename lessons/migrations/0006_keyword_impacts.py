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

CREATE OR REPLACE FUNCTION lessons_keyword_index_row(p_kind "char", p_team bigint, p_row bigint, p_vector tsvector, p_sign integer)
RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    la integer; lb integer; lc integer; ld integer;
    ref lessons_keyword_reference;
    my_shard smallint := pg_backend_pid() % 16;
BEGIN
    PERFORM pg_advisory_xact_lock_shared(lessons_keyword_team_lock(p_kind, p_team));
    -- Two sessions sharing a shard take turns for the whole transaction: a multi-row transaction
    -- would otherwise lock df rows in its rows' order and deadlock with another.
    PERFORM pg_advisory_xact_lock(
        hashtextextended('lessons_keyword_shard:' || p_kind::text || ':' || p_team::text || ':' || my_shard::text, 0));
    IF p_sign > 0 THEN
        SELECT coalesce(sum(t.tf_a), 0), coalesce(sum(t.tf_b), 0), coalesce(sum(t.tf_c), 0), coalesce(sum(t.tf_d), 0)
          INTO la, lb, lc, ld
          FROM lessons_keyword_terms(p_vector) AS t;
        SELECT * INTO ref FROM lessons_keyword_reference WHERE kind = p_kind AND team_id = p_team;
        IF NOT FOUND THEN
            INSERT INTO lessons_keyword_reference (kind, team_id, avglen, k1, b, w_a, w_b, w_c, w_d)
            VALUES (p_kind, p_team, greatest(1.5 * la + lb + 0.5 * lc + ld, 1), 1.2, 0.5, 1.5, 1.0, 0.5, 1.0)
            ON CONFLICT DO NOTHING;
            SELECT * INTO ref FROM lessons_keyword_reference WHERE kind = p_kind AND team_id = p_team;
        END IF;
        INSERT INTO lessons_keyword_posting
               (kind, team_id, row_id, lexeme, tf_a, tf_b, tf_c, tf_d, len_a, len_b, len_c, len_d, impact)
        SELECT p_kind, p_team, p_row, t.lexeme, t.tf_a, t.tf_b, t.tf_c, t.tf_d, la, lb, lc, ld,
               lessons_keyword_impact(ref, t.tf_a, t.tf_b, t.tf_c, t.tf_d, la, lb, lc, ld)
          FROM lessons_keyword_terms(p_vector) AS t;
        INSERT INTO lessons_keyword_df AS d (kind, team_id, lexeme, shard, df)
        SELECT p_kind, p_team, t.lexeme, my_shard, 1 FROM lessons_keyword_terms(p_vector) AS t ORDER BY t.lexeme
        ON CONFLICT (kind, team_id, lexeme, shard) DO UPDATE SET df = d.df + EXCLUDED.df;
    ELSE
        -- What was counted is what the postings say, whatever the old vector holds.
        SELECT coalesce(max(p.len_a), 0), coalesce(max(p.len_b), 0), coalesce(max(p.len_c), 0),
               coalesce(max(p.len_d), 0)
          INTO la, lb, lc, ld
          FROM lessons_keyword_posting AS p WHERE p.kind = p_kind AND p.row_id = p_row;
        WITH gone AS (
            DELETE FROM lessons_keyword_posting WHERE kind = p_kind AND row_id = p_row RETURNING team_id, lexeme
        )
        INSERT INTO lessons_keyword_df AS d (kind, team_id, lexeme, shard, df)
        SELECT p_kind, gone.team_id, gone.lexeme, my_shard, -1 FROM gone ORDER BY gone.lexeme
        ON CONFLICT (kind, team_id, lexeme, shard) DO UPDATE SET df = d.df + EXCLUDED.df;
    END IF;
    INSERT INTO lessons_keyword_stats AS s (kind, team_id, shard, doc_count, len_a, len_b, len_c, len_d)
    VALUES (p_kind, p_team, my_shard, p_sign, p_sign * la, p_sign * lb, p_sign * lc, p_sign * ld)
    ON CONFLICT (kind, team_id, shard) DO UPDATE
       SET doc_count = s.doc_count + EXCLUDED.doc_count,
           len_a = s.len_a + EXCLUDED.len_a, len_b = s.len_b + EXCLUDED.len_b,
           len_c = s.len_c + EXCLUDED.len_c, len_d = s.len_d + EXCLUDED.len_d;
END $$;

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
CREATE OR REPLACE FUNCTION lessons_keyword_index_row(p_kind "char", p_team bigint, p_row bigint, p_vector tsvector, p_sign integer)
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
