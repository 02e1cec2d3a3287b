"""The keyword index: BM25 postings kept in step with the rows by triggers.

For every lesson and memory row, `lessons_keyword_posting` holds one row per lexeme of its stored
search vector, with the term's frequency in each weighted field (A: title and exact terms, B: body,
C: context, D: unused) and the row's field lengths; `lessons_keyword_stats` holds each team's
document count and total field lengths. Triggers on the row tables keep both current on INSERT,
DELETE and any UPDATE that changes the search vector or the team, including raw SQL behind the
ORM's back, so BM25's document frequencies and lengths are always those of the stored rows.
"""

from django.db import migrations

POSTINGS_SQL = r"""
CREATE TABLE lessons_keyword_posting (
    kind    "char"  NOT NULL,          -- 'l' lesson, 'm' memory
    team_id bigint  NOT NULL,
    row_id  bigint  NOT NULL,
    lexeme  text    NOT NULL,
    tf_a    smallint NOT NULL, tf_b smallint NOT NULL, tf_c smallint NOT NULL, tf_d smallint NOT NULL,
    len_a   integer NOT NULL, len_b integer NOT NULL, len_c integer NOT NULL, len_d integer NOT NULL,
    PRIMARY KEY (kind, row_id, lexeme)
);
-- The scoring query reads postings by (kind, team, lexeme); INCLUDE makes it an index-only scan.
CREATE INDEX lessons_keyword_posting_lookup
    ON lessons_keyword_posting (kind, team_id, lexeme)
    INCLUDE (row_id, tf_a, tf_b, tf_c, tf_d, len_a, len_b, len_c, len_d);

CREATE TABLE lessons_keyword_stats (
    kind      "char" NOT NULL,
    team_id   bigint NOT NULL,
    doc_count bigint NOT NULL DEFAULT 0,
    len_a bigint NOT NULL DEFAULT 0, len_b bigint NOT NULL DEFAULT 0,
    len_c bigint NOT NULL DEFAULT 0, len_d bigint NOT NULL DEFAULT 0,
    PRIMARY KEY (kind, team_id)
);

-- One row per lexeme: how often it occurs in each weighted field of the vector.
CREATE FUNCTION lessons_keyword_terms(vector tsvector)
RETURNS TABLE (lexeme text, tf_a smallint, tf_b smallint, tf_c smallint, tf_d smallint)
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT u.lexeme,
           count(*) FILTER (WHERE w = 'A')::smallint,
           count(*) FILTER (WHERE w = 'B')::smallint,
           count(*) FILTER (WHERE w = 'C')::smallint,
           count(*) FILTER (WHERE w = 'D')::smallint
      FROM unnest(vector) AS u, unnest(u.weights) AS w
     GROUP BY u.lexeme
$$;

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

CREATE FUNCTION lessons_keyword_sync() RETURNS trigger LANGUAGE plpgsql AS $$
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
CREATE TRIGGER lessons_lesson_keyword_update AFTER UPDATE ON lessons_lesson
    FOR EACH ROW WHEN (OLD.search_vector IS DISTINCT FROM NEW.search_vector OR OLD.team_id IS DISTINCT FROM NEW.team_id)
    EXECUTE FUNCTION lessons_keyword_sync('l');
CREATE TRIGGER lessons_memory_keyword_insert_delete AFTER INSERT OR DELETE ON lessons_memory
    FOR EACH ROW EXECUTE FUNCTION lessons_keyword_sync('m');
CREATE TRIGGER lessons_memory_keyword_update AFTER UPDATE ON lessons_memory
    FOR EACH ROW WHEN (OLD.search_vector IS DISTINCT FROM NEW.search_vector OR OLD.team_id IS DISTINCT FROM NEW.team_id)
    EXECUTE FUNCTION lessons_keyword_sync('m');

-- Rows that existed before this migration.
SELECT lessons_keyword_index_row('l', team_id, id, search_vector, 1) FROM lessons_lesson;
SELECT lessons_keyword_index_row('m', team_id, id, search_vector, 1) FROM lessons_memory;
"""

REVERSE_SQL = r"""
DROP TRIGGER IF EXISTS lessons_lesson_keyword_insert_delete ON lessons_lesson;
DROP TRIGGER IF EXISTS lessons_lesson_keyword_update ON lessons_lesson;
DROP TRIGGER IF EXISTS lessons_memory_keyword_insert_delete ON lessons_memory;
DROP TRIGGER IF EXISTS lessons_memory_keyword_update ON lessons_memory;
DROP FUNCTION IF EXISTS lessons_keyword_sync();
DROP FUNCTION IF EXISTS lessons_keyword_index_row("char", bigint, bigint, tsvector, integer);
DROP FUNCTION IF EXISTS lessons_keyword_terms(tsvector);
DROP TABLE IF EXISTS lessons_keyword_stats;
DROP TABLE IF EXISTS lessons_keyword_posting;
"""


class Migration(migrations.Migration):
    dependencies = [("lessons", "0001_initial")]

    operations = [migrations.RunSQL(POSTINGS_SQL, reverse_sql=REVERSE_SQL)]
