"""Search vectors that keep the words after `<script>` and `<style>` (lessons.models.WithoutTagStarts).

PostgreSQL's text parser read "Load <script> tags with defer" as the word "load" and an HTML tag
running to the end of the field, so a lesson about web pages lost its words from keyword search.
The vectors now read each text without its `<`; only rows whose text has a `<` change.

The vectors are rebuilt as lessons/migrations/_search_vectors.py describes.
"""

import django.contrib.postgres.search
import lessons.models
from django.db import migrations, models

from lessons.migrations._search_vectors import rebuild_search_vectors as rebuild

# table, keyword index kind, model, the texts whose `<` changes the vector
TABLES = (
    ("lessons_lesson", "l", "Lesson", "t.title || t.description || t.recommendation || t.context"),
    ("lessons_memory", "m", "Memory", "t.content || t.details || t.people::text"),
)


def rebuild_search_vectors(apps, schema_editor):
    rebuild(apps, schema_editor, tables=[(table, kind, model, f"strpos({texts}, '<') > 0")
                                         for table, kind, model, texts in TABLES])


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
