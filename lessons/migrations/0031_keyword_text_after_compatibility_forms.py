"""`lessons_keyword_text` sets aside a `<` that the compatibility form makes (migration 0030): a full-width
"＜" (U+FF1C) or a small "﹤" (U+FE64) is "<" in NFKC, and the text parser takes "<script>" and "<style>" for
HTML and drops every word after them in the field (migration 0018's fault). The columns and the queries set
aside "<" before the function runs, so "Load ＜script＞ tags with defer" was indexed as `load` alone, and the
query "＜script＞ tags" matched nothing. The function now sets it aside after the form is read.

Only rows holding one of those two characters change; their vectors and keyword postings are rebuilt as
lessons/migrations/_search_vectors.py describes. On a database that is not UTF8, 0030 left the function
without the form, and this one leaves it too. Reversing keeps the function, as 0030's reverse does.
"""

from django.db import migrations

from lessons.migrations._search_vectors import rebuild_search_vectors as rebuild

# As migrations 0028 and 0030 (kept here, not imported: a migration reads as it was when written)
CHARACTER_WORDS = "\\u3040-\\u30ff\\u3400-\\u4dbf\\u4e00-\\u9fff\\uf900-\\ufaff"
TABLES = (
    ("lessons_lesson", "l", "Lesson",
     "t.title || t.description || t.recommendation || t.context || t.category || lessons_array_as_text(t.tags)"
     " || lessons_array_as_text(t.tech_stacks) || lessons_array_as_text(t.project_types)"),
    ("lessons_memory", "m", "Memory",
     "t.content || t.details || lessons_array_as_text(t.people) || lessons_array_as_text(t.categories)"
     " || lessons_array_as_text(t.emotions)"),
)
# The characters whose compatibility form holds a "<"
BECOME_LESS_THAN = "~ '[\\uff1c\\ufe64]'"


def set_aside_less_than_after_the_form(apps, schema_editor):
    with schema_editor.connection.cursor() as cursor:
        cursor.execute("SELECT current_setting('server_encoding') = 'UTF8'")
        if not cursor.fetchone()[0]:
            return
        cursor.execute("SELECT extnamespace::regnamespace::text FROM pg_extension WHERE extname = 'unaccent'")
        [schema] = cursor.fetchone()  # migration 0022 created the extension
        cursor.execute(
            "CREATE OR REPLACE FUNCTION lessons_keyword_text(text) RETURNS text"
            " LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE"
            f" AS $$ SELECT regexp_replace({schema}.unaccent('{schema}.unaccent'::regdictionary,"
            f" pg_catalog.translate(pg_catalog.normalize($1, 'NFKC'), '<', ' ')),"
            f" '([{CHARACTER_WORDS}])', ' \\1 ', 'g') $$"
        )
        rebuild(apps, schema_editor, tables=[(table, kind, model, f"({texts}) {BECOME_LESS_THAN}")
                                             for table, kind, model, texts in TABLES])


class Migration(migrations.Migration):

    dependencies = [
        ("lessons", "0030_keyword_text_compatibility_forms"),
    ]

    operations = [
        migrations.RunPython(set_aside_less_than_after_the_form, migrations.RunPython.noop),
    ]
