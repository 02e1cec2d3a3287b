"""Search vectors that keep the words after `<script>` and `<style>` (lessons.models.WithoutTagStarts).

PostgreSQL's text parser read "Load <script> tags with defer" as the word "load" and an HTML tag
running to the end of the field, so a lesson about web pages lost its words from keyword search.
The vectors now read each text without its `<`; only rows whose text has a `<` change.

A stored generated column cannot take a new expression before PostgreSQL 17 (and Django does not
alter one), so the column is dropped and added again: the triggers and indexes that name it are
read from the catalogue and created again as they were. The keyword index's postings of the rows
that change are taken out with their old vectors and put back with their new ones, by the
function the triggers use (migrations 0006, 0011); other rows' postings stay as they are. The
table is rewritten, under an exclusive lock (seconds for SciFact's 5,183 lessons).
"""

import django.contrib.postgres.search
import lessons.models
from django.db import migrations, models

# table, keyword index kind, model, the texts whose `<` changes the vector
TABLES = (
    ("lessons_lesson", "l", "Lesson", "t.title || t.description || t.recommendation || t.context"),
    ("lessons_memory", "m", "Memory", "t.content || t.details || t.people::text"),
)


def rebuild_search_vectors(apps, schema_editor):
    with schema_editor.connection.cursor() as cursor:
        for table, kind, model_name, texts in TABLES:
            changing = f"FROM {table} AS t WHERE strpos({texts}, '<') > 0"
            cursor.execute(
                "SELECT lessons_keyword_apply(%s, (SELECT coalesce(array_agg(ROW(t.id, t.team_id, t.search_vector, "
                f"NULL)::lessons_keyword_row), '{{}}') {changing}), '{{}}')",
                [kind],
            )
            cursor.execute(
                "SELECT tgname, pg_get_triggerdef(oid) FROM pg_trigger WHERE tgrelid = %s::regclass"
                " AND NOT tgisinternal AND pg_get_triggerdef(oid) LIKE '%%search_vector%%' ORDER BY tgname",
                [table],
            )
            triggers = dict(cursor.fetchall())
            cursor.execute(
                "SELECT indexdef FROM pg_indexes WHERE schemaname = current_schema() AND tablename = %s"
                " AND indexdef LIKE '%%search_vector%%' ORDER BY indexname",
                [table],
            )
            indexes = [definition for (definition,) in cursor.fetchall()]
            for name in triggers:  # their WHEN clauses name the column; its indexes go with it
                cursor.execute(f"DROP TRIGGER {name} ON {table}")
            cursor.execute(f"ALTER TABLE {table} DROP COLUMN search_vector")  # anything else on it: refused
            model = apps.get_model("lessons", model_name)
            schema_editor.add_field(model, model._meta.get_field("search_vector"))
            for statement in [*indexes, *triggers.values()]:
                cursor.execute(statement)
            cursor.execute(
                "SELECT lessons_keyword_apply(%s, '{}', (SELECT coalesce(array_agg(ROW(t.id, t.team_id, "
                f"t.search_vector, lessons_keyword_signature(t))::lessons_keyword_row), '{{}}') {changing}))",
                [kind],
            )


class Migration(migrations.Migration):

    dependencies = [
        ('lessons', '0017_memory_moments_in_range'),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(state_operations=[
            migrations.AlterField(
                model_name='lesson',
                name='search_vector',
                field=models.GeneratedField(db_persist=True, expression=django.contrib.postgres.search.CombinedSearchVector(django.contrib.postgres.search.CombinedSearchVector(django.contrib.postgres.search.CombinedSearchVector(django.contrib.postgres.search.CombinedSearchVector(django.contrib.postgres.search.CombinedSearchVector(django.contrib.postgres.search.CombinedSearchVector(django.contrib.postgres.search.CombinedSearchVector(django.contrib.postgres.search.SearchVector(lessons.models.WithoutTagStarts('title'), config='english', weight='A'), '||', django.contrib.postgres.search.SearchVector(lessons.models.ArrayAsText('tags'), config='simple', weight='A'), django.contrib.postgres.search.SearchConfig('english')), '||', django.contrib.postgres.search.SearchVector(lessons.models.ArrayAsText('tech_stacks'), config='simple', weight='A'), django.contrib.postgres.search.SearchConfig('english')), '||', django.contrib.postgres.search.SearchVector('category', config='simple', weight='A'), django.contrib.postgres.search.SearchConfig('english')), '||', django.contrib.postgres.search.SearchVector(lessons.models.WithoutTagStarts('description'), config='english', weight='B'), django.contrib.postgres.search.SearchConfig('english')), '||', django.contrib.postgres.search.SearchVector(lessons.models.WithoutTagStarts('recommendation'), config='english', weight='B'), django.contrib.postgres.search.SearchConfig('english')), '||', django.contrib.postgres.search.SearchVector(lessons.models.WithoutTagStarts('context'), config='english', weight='C'), django.contrib.postgres.search.SearchConfig('english')), '||', django.contrib.postgres.search.SearchVector(lessons.models.ArrayAsText('project_types'), config='simple', weight='C'), django.contrib.postgres.search.SearchConfig('english')), output_field=django.contrib.postgres.search.SearchVectorField()),
            ),
            migrations.AlterField(
                model_name='memory',
                name='search_vector',
                field=models.GeneratedField(db_persist=True, expression=django.contrib.postgres.search.CombinedSearchVector(django.contrib.postgres.search.CombinedSearchVector(django.contrib.postgres.search.CombinedSearchVector(django.contrib.postgres.search.CombinedSearchVector(django.contrib.postgres.search.SearchVector(lessons.models.WithoutTagStarts('content'), config='english', weight='A'), '||', django.contrib.postgres.search.SearchVector(lessons.models.WithoutTagStarts(lessons.models.ArrayAsText('people')), config='simple', weight='A'), django.contrib.postgres.search.SearchConfig('english')), '||', django.contrib.postgres.search.SearchVector(lessons.models.ArrayAsText('categories'), config='simple', weight='A'), django.contrib.postgres.search.SearchConfig('english')), '||', django.contrib.postgres.search.SearchVector(lessons.models.ArrayAsText('emotions'), config='simple', weight='A'), django.contrib.postgres.search.SearchConfig('english')), '||', django.contrib.postgres.search.SearchVector(lessons.models.WithoutTagStarts('details'), config='english', weight='B'), django.contrib.postgres.search.SearchConfig('english')), output_field=django.contrib.postgres.search.SearchVectorField()),
            ),
        ]),
        migrations.RunPython(rebuild_search_vectors, migrations.RunPython.noop),
    ]
