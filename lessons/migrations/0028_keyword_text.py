"""Search vectors that read every text as lessons.models.KeywordText says: without its accents
("Café" as `cafe`) and with each Han, Hiragana and Katakana character a word of its own.

The keyword index stored "Café" as `café` and "Zoë" as `zoë`, so "cafe" and "Zoe" matched nothing
in keyword search, while the person search already folded both sides; and "我喜欢咖啡" was one
word, so "咖啡" matched nothing. Queries are now read the same way (lessons/search/keyword.py).
`lessons_keyword_text` uses unaccent(), which is STABLE (its rules file could change), so it is
marked IMMUTABLE itself, as a generated column requires; it names the extension's schema, so it
also works under another search_path (a restore). Only rows with a character outside ASCII
change; their vectors are rebuilt as lessons/migrations/_search_vectors.py describes.

Reversing this migration keeps the new vectors and the function: searches of the older code fold
nothing, so their accented words match as before; only unaccented queries keep finding accented
rows.
"""

import django.contrib.postgres.search
import lessons.models
from django.db import migrations, models

from lessons.migrations._search_vectors import rebuild_search_vectors as rebuild

# Han (with its extensions A and the compatibility block), Hiragana and Katakana: scripts written
# without spaces. Hangul is written with spaces and stays as it is.
CHARACTER_WORDS = "\\u3040-\\u30ff\\u3400-\\u4dbf\\u4e00-\\u9fff\\uf900-\\ufaff"
NON_ASCII = "~ '[^\\x01-\\x7F]'"
# table, keyword index kind, model, the texts the vector reads
TABLES = (
    ("lessons_lesson", "l", "Lesson",
     "t.title || t.description || t.recommendation || t.context || t.category || lessons_array_as_text(t.tags)"
     " || lessons_array_as_text(t.tech_stacks) || lessons_array_as_text(t.project_types)"),
    ("lessons_memory", "m", "Memory",
     "t.content || t.details || lessons_array_as_text(t.people) || lessons_array_as_text(t.categories)"
     " || lessons_array_as_text(t.emotions)"),
)


def create_keyword_text_function(apps, schema_editor):
    with schema_editor.connection.cursor() as cursor:
        cursor.execute("SELECT extnamespace::regnamespace::text FROM pg_extension WHERE extname = 'unaccent'")
        [schema] = cursor.fetchone()  # migration 0022 created the extension
        cursor.execute(
            "CREATE OR REPLACE FUNCTION lessons_keyword_text(text) RETURNS text"
            " LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE"
            f" AS $$ SELECT regexp_replace({schema}.unaccent('{schema}.unaccent'::regdictionary, $1),"
            f" '([{CHARACTER_WORDS}])', ' \\1 ', 'g') $$"
        )


def rebuild_search_vectors(apps, schema_editor):
    rebuild(apps, schema_editor, tables=[(table, kind, model, f"({texts}) {NON_ASCII}")
                                         for table, kind, model, texts in TABLES])


class Migration(migrations.Migration):

    dependencies = [
        ("lessons", "0027_forget_deleted_rows_dismissals"),
    ]

    operations = [
        migrations.RunPython(create_keyword_text_function, migrations.RunPython.noop),
        migrations.SeparateDatabaseAndState(state_operations=[
            migrations.AlterField(
                model_name='lesson',
                name='search_vector',
                field=models.GeneratedField(db_persist=True, expression=django.contrib.postgres.search.CombinedSearchVector(django.contrib.postgres.search.CombinedSearchVector(django.contrib.postgres.search.CombinedSearchVector(django.contrib.postgres.search.CombinedSearchVector(django.contrib.postgres.search.CombinedSearchVector(django.contrib.postgres.search.CombinedSearchVector(django.contrib.postgres.search.CombinedSearchVector(django.contrib.postgres.search.SearchVector(lessons.models.KeywordText(lessons.models.WithoutTagStarts('title')), config='english', weight='A'), '||', django.contrib.postgres.search.SearchVector(lessons.models.KeywordText(lessons.models.ArrayAsText('tags')), config='simple', weight='A'), django.contrib.postgres.search.SearchConfig('english')), '||', django.contrib.postgres.search.SearchVector(lessons.models.KeywordText(lessons.models.ArrayAsText('tech_stacks')), config='simple', weight='A'), django.contrib.postgres.search.SearchConfig('english')), '||', django.contrib.postgres.search.SearchVector(lessons.models.KeywordText('category'), config='simple', weight='A'), django.contrib.postgres.search.SearchConfig('english')), '||', django.contrib.postgres.search.SearchVector(lessons.models.KeywordText(lessons.models.WithoutTagStarts('description')), config='english', weight='B'), django.contrib.postgres.search.SearchConfig('english')), '||', django.contrib.postgres.search.SearchVector(lessons.models.KeywordText(lessons.models.WithoutTagStarts('recommendation')), config='english', weight='B'), django.contrib.postgres.search.SearchConfig('english')), '||', django.contrib.postgres.search.SearchVector(lessons.models.KeywordText(lessons.models.WithoutTagStarts('context')), config='english', weight='C'), django.contrib.postgres.search.SearchConfig('english')), '||', django.contrib.postgres.search.SearchVector(lessons.models.KeywordText(lessons.models.ArrayAsText('project_types')), config='simple', weight='C'), django.contrib.postgres.search.SearchConfig('english')), output_field=django.contrib.postgres.search.SearchVectorField()),
            ),
            migrations.AlterField(
                model_name='memory',
                name='search_vector',
                field=models.GeneratedField(db_persist=True, expression=django.contrib.postgres.search.CombinedSearchVector(django.contrib.postgres.search.CombinedSearchVector(django.contrib.postgres.search.CombinedSearchVector(django.contrib.postgres.search.CombinedSearchVector(django.contrib.postgres.search.SearchVector(lessons.models.KeywordText(lessons.models.WithoutTagStarts('content')), config='english', weight='A'), '||', django.contrib.postgres.search.SearchVector(lessons.models.KeywordText(lessons.models.WithoutTagStarts(lessons.models.ArrayAsText('people'))), config='simple', weight='A'), django.contrib.postgres.search.SearchConfig('english')), '||', django.contrib.postgres.search.SearchVector(lessons.models.KeywordText(lessons.models.ArrayAsText('categories')), config='simple', weight='A'), django.contrib.postgres.search.SearchConfig('english')), '||', django.contrib.postgres.search.SearchVector(lessons.models.KeywordText(lessons.models.ArrayAsText('emotions')), config='simple', weight='A'), django.contrib.postgres.search.SearchConfig('english')), '||', django.contrib.postgres.search.SearchVector(lessons.models.KeywordText(lessons.models.WithoutTagStarts('details')), config='english', weight='B'), django.contrib.postgres.search.SearchConfig('english')), output_field=django.contrib.postgres.search.SearchVectorField()),
            ),
        ]),
        migrations.RunPython(rebuild_search_vectors, migrations.RunPython.noop),
    ]
