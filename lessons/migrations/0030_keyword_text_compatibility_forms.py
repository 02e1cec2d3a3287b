"""The keyword index reads a text in its Unicode compatibility form (NFKC) before folding its accents
and spacing its CJK characters (migration 0028): full-width Latin ("ＲＥＡＣＴ", as a Chinese or
Japanese keyboard types it) is `react`, half-width Katakana ("ｺｰﾋｰ") is the full-width "コーヒー"
that Japanese text usually carries, and a ligature ("ﬁle") is "file".

Before, "ＲＥＡＣＴ" was a lexeme of its own that no query typed in ASCII found (and the reverse),
and half-width Katakana, outside the ranges 0028 spaces, stayed one word. The exact-term side
(lessons.search.kinds.canonical) already read terms in a compatibility form (NFKD), so a query's
"ｒｅａｃｔ" named the tag `react` while its BM25 matched nothing.

Only rows whose text is not already in that form change (`IS NFKC NORMALIZED`); their vectors and
keyword postings are rebuilt as lessons/migrations/_search_vectors.py describes. PostgreSQL's
normalize() needs a UTF8 database; on another encoding the function is left as 0028 made it (such a
database cannot store these characters anyway). Reversing this migration keeps the function and
the vectors: queries go through the same function, so they keep matching.
"""

from django.db import migrations

from lessons.migrations._search_vectors import rebuild_search_vectors as rebuild

# As migration 0028 (kept here, not imported: a migration reads as it was when written)
CHARACTER_WORDS = "\\u3040-\\u30ff\\u3400-\\u4dbf\\u4e00-\\u9fff\\uf900-\\ufaff"
TABLES = (
    ("lessons_lesson", "l", "Lesson",
     "t.title || t.description || t.recommendation || t.context || t.category || lessons_array_as_text(t.tags)"
     " || lessons_array_as_text(t.tech_stacks) || lessons_array_as_text(t.project_types)"),
    ("lessons_memory", "m", "Memory",
     "t.content || t.details || lessons_array_as_text(t.people) || lessons_array_as_text(t.categories)"
     " || lessons_array_as_text(t.emotions)"),
)


def _utf8(cursor) -> bool:
    cursor.execute("SELECT current_setting('server_encoding') = 'UTF8'")
    return cursor.fetchone()[0]


def read_compatibility_forms(apps, schema_editor):
    with schema_editor.connection.cursor() as cursor:
        if not _utf8(cursor):
            return
        cursor.execute("SELECT extnamespace::regnamespace::text FROM pg_extension WHERE extname = 'unaccent'")
        [schema] = cursor.fetchone()  # migration 0022 created the extension
        cursor.execute(
            "CREATE OR REPLACE FUNCTION lessons_keyword_text(text) RETURNS text"
            " LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE"
            f" AS $$ SELECT regexp_replace({schema}.unaccent('{schema}.unaccent'::regdictionary,"
            f" pg_catalog.normalize($1, 'NFKC')), '([{CHARACTER_WORDS}])', ' \\1 ', 'g') $$"
        )
        rebuild(apps, schema_editor, tables=[(table, kind, model, f"NOT (({texts}) IS NFKC NORMALIZED)")
                                             for table, kind, model, texts in TABLES])


class Migration(migrations.Migration):

    dependencies = [
        ("lessons", "0029_term_spellings"),
    ]

    operations = [
        migrations.RunPython(read_compatibility_forms, migrations.RunPython.noop),
    ]
