"""Each keyword posting carries a signature of its row's filter values, so a filtered search reads
the heads of the rows it may show.

The keyword leg reads each query term's best postings (its head) and checks the caller's filter
row by row as it walks them (lessons/search/keyword.py). With a narrow filter most of a head
belongs to rows the filter rejects: at 100,000 lessons, a category filter passing 1 row in 11
checked ~2,500 rows (2-2.5 us each, an index probe) to keep ~250, and its heads held few rows it
could show, so its answers were seldom proved.

- `lessons_keyword_posting.signature`: a 64-bit Bloom signature of the row's values of the
  filters that test equality (lessons: status, category, tech stacks, project types, tags;
  memories: current or a version, categories, emotions, people), three bits per value
  (`lessons_keyword_facet`, the same arithmetic as lessons/search/signature.py). A posting whose
  signature lacks a filter value's bits belongs to a row the filter rejects; one that has them
  may still be rejected (a false positive), so the row-by-row check stays, now on rows that
  nearly all pass.
- The default, -1 (every bit set), is "unknown": such a posting passes every test, so a posting
  written by a path that does not know signatures is still found, only not skipped.
- Kept current by the triggers that write postings (migration 0006), and by a new update trigger
  when a row's filter values change while its text does not (accepting a proposal, retagging).
- The impact index carries the signature, so a head read skips rejected rows without a heap visit.
"""

import importlib
import re

from django.db import migrations

# The write path of migration 0006, edited: a posting takes its row's signature.
_0006_SQL = importlib.import_module("lessons.migrations.0006_keyword_impacts").FORWARD_SQL


def _function_0006(name: str) -> str:
    """The CREATE [OR REPLACE] FUNCTION statement of `name` in migration 0006, as OR REPLACE."""
    start = re.search(rf"CREATE (OR REPLACE )?FUNCTION {name}\(", _0006_SQL).start()
    statement = _0006_SQL[start:_0006_SQL.index("END $$;", start) + len("END $$;")]
    return re.sub(r"^CREATE (OR REPLACE )?FUNCTION", "CREATE OR REPLACE FUNCTION", statement)


def _edited(sql: str, edits: list[tuple[str, str]]) -> str:
    for old, new in edits:
        assert sql.count(old) == 1, old
        sql = sql.replace(old, new)
    return sql


APPLY_WITH_SIGNATURES = _edited(_function_0006("lessons_keyword_apply"), [
    ("SELECT a.id, a.team_id, t.lexeme,", "SELECT a.id, a.team_id, a.signature, t.lexeme,"),
    ("len_a, len_b, len_c, len_d, impact)", "len_a, len_b, len_c, len_d, impact, signature)"),
    ("l.la, l.lb, l.lc, l.ld)\n              FROM terms",
     "l.la, l.lb, l.lc, l.ld),\n                   coalesce(t.signature, -1)\n              FROM terms"),
])

FORWARD_SQL = r"""
ALTER TABLE lessons_keyword_posting ADD COLUMN signature bigint NOT NULL DEFAULT -1;

-- Three bits of 64 for one filter value: bytes 0-2 of md5('field:value'), each mod 64.
CREATE FUNCTION lessons_keyword_facet(p_field text, p_value text) RETURNS bigint
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
    SELECT (1::bigint << (get_byte(h, 0) % 64)) | (1::bigint << (get_byte(h, 1) % 64))
           | (1::bigint << (get_byte(h, 2) % 64))
      FROM (SELECT decode(md5(p_field || ':' || p_value), 'hex') AS h) AS digest
$$;

CREATE FUNCTION lessons_keyword_signature(r lessons_lesson) RETURNS bigint
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT coalesce(bit_or(lessons_keyword_facet(f.field, f.value)), 0)
      FROM (SELECT 'status', r.status UNION ALL SELECT 'category', r.category
            UNION ALL SELECT 'tech_stacks', unnest(r.tech_stacks)
            UNION ALL SELECT 'project_types', unnest(r.project_types)
            UNION ALL SELECT 'tags', unnest(r.tags)) AS f(field, value)
$$;

CREATE FUNCTION lessons_keyword_signature(r lessons_memory) RETURNS bigint
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT coalesce(bit_or(lessons_keyword_facet(f.field, f.value)), 0)
      FROM (SELECT 'current', CASE WHEN r.current_version_id IS NULL THEN 'yes' END
            UNION ALL SELECT 'categories', unnest(r.categories)
            UNION ALL SELECT 'emotions', unnest(r.emotions)
            UNION ALL SELECT 'people', lower(unnest(r.people))) AS f(field, value)
$$;

ALTER TYPE lessons_keyword_row ADD ATTRIBUTE signature bigint;

-- APPLY_WITH_SIGNATURES

-- The trigger functions serve both tables. A transition table's rows are plain records, so each
-- table's branch names its row type (PL/pgSQL plans a statement when it first runs it).
CREATE OR REPLACE FUNCTION lessons_keyword_on_insert() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    added lessons_keyword_row[];
BEGIN
    IF TG_ARGV[0] = 'l' THEN
        SELECT coalesce(array_agg(ROW(n.id, n.team_id, n.search_vector,
                                      lessons_keyword_signature(n::lessons_lesson))::lessons_keyword_row), '{}')
          INTO added FROM new_rows AS n;
    ELSE
        SELECT coalesce(array_agg(ROW(n.id, n.team_id, n.search_vector,
                                      lessons_keyword_signature(n::lessons_memory))::lessons_keyword_row), '{}')
          INTO added FROM new_rows AS n;
    END IF;
    PERFORM lessons_keyword_apply(TG_ARGV[0]::"char", '{}', added);
    RETURN NULL;
END $$;

CREATE OR REPLACE FUNCTION lessons_keyword_on_delete() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM lessons_keyword_apply(TG_ARGV[0]::"char",
        (SELECT coalesce(array_agg(ROW(o.id, o.team_id, o.search_vector, NULL)::lessons_keyword_row), '{}')
           FROM old_rows AS o),
        '{}');
    RETURN NULL;
END $$;

CREATE OR REPLACE FUNCTION lessons_keyword_sync() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM lessons_keyword_apply(TG_ARGV[0]::"char",
        ARRAY[ROW(OLD.id, OLD.team_id, OLD.search_vector, NULL)::lessons_keyword_row],
        ARRAY[ROW(NEW.id, NEW.team_id, NEW.search_vector, lessons_keyword_signature(NEW))::lessons_keyword_row]);
    RETURN NULL;
END $$;

-- Filter values changed, text and team not (those rewrite the postings, lessons_keyword_sync).
CREATE FUNCTION lessons_keyword_resign() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE lessons_keyword_posting SET signature = lessons_keyword_signature(NEW)
     WHERE kind = TG_ARGV[0]::"char" AND row_id = NEW.id;
    RETURN NULL;
END $$;
CREATE TRIGGER lessons_lesson_keyword_resign AFTER UPDATE ON lessons_lesson FOR EACH ROW
    WHEN (lessons_keyword_signature(OLD) IS DISTINCT FROM lessons_keyword_signature(NEW)
          AND OLD.search_vector IS NOT DISTINCT FROM NEW.search_vector AND OLD.team_id = NEW.team_id)
    EXECUTE FUNCTION lessons_keyword_resign('l');
CREATE TRIGGER lessons_memory_keyword_resign AFTER UPDATE ON lessons_memory FOR EACH ROW
    WHEN (lessons_keyword_signature(OLD) IS DISTINCT FROM lessons_keyword_signature(NEW)
          AND OLD.search_vector IS NOT DISTINCT FROM NEW.search_vector AND OLD.team_id = NEW.team_id)
    EXECUTE FUNCTION lessons_keyword_resign('m');

-- Postings written before this migration.
UPDATE lessons_keyword_posting AS p SET signature = lessons_keyword_signature(l)
  FROM lessons_lesson AS l WHERE p.kind = 'l' AND p.row_id = l.id;
UPDATE lessons_keyword_posting AS p SET signature = lessons_keyword_signature(m)
  FROM lessons_memory AS m WHERE p.kind = 'm' AND p.row_id = m.id;

DROP INDEX lessons_keyword_posting_impact;
CREATE INDEX lessons_keyword_posting_impact
    ON lessons_keyword_posting (kind, team_id, lexeme, impact DESC)
    INCLUDE (row_id, tf_a, tf_b, tf_c, tf_d, len_a, len_b, len_c, len_d, signature);
"""

REVERSE_SQL = r"""
DROP INDEX lessons_keyword_posting_impact;
CREATE INDEX lessons_keyword_posting_impact
    ON lessons_keyword_posting (kind, team_id, lexeme, impact DESC)
    INCLUDE (row_id, tf_a, tf_b, tf_c, tf_d, len_a, len_b, len_c, len_d);
DROP TRIGGER lessons_lesson_keyword_resign ON lessons_lesson;
DROP TRIGGER lessons_memory_keyword_resign ON lessons_memory;
DROP FUNCTION lessons_keyword_resign();
-- lessons_keyword_apply and the three trigger functions: 0006's again (appended below)
ALTER TYPE lessons_keyword_row DROP ATTRIBUTE signature;
DROP FUNCTION lessons_keyword_signature(lessons_lesson);
DROP FUNCTION lessons_keyword_signature(lessons_memory);
DROP FUNCTION lessons_keyword_facet(text, text);
ALTER TABLE lessons_keyword_posting DROP COLUMN signature;
"""


class Migration(migrations.Migration):
    dependencies = [("lessons", "0010_keyword_rows_leave_with_their_team")]

    operations = [
        migrations.RunSQL(FORWARD_SQL.replace("-- APPLY_WITH_SIGNATURES", APPLY_WITH_SIGNATURES),
                          reverse_sql=REVERSE_SQL + "\n".join(
                              _function_0006(name) for name in
                              ("lessons_keyword_apply", "lessons_keyword_on_insert", "lessons_keyword_on_delete",
                               "lessons_keyword_sync"))),
    ]
