"""A uid for every lesson and memory: who the row is across an export and an import.

A backup restored over the team it came from matched a row without an `external_id` on its text
alone, so a row whose text was edited since came back as a second row. Exports now write each
row's uid and imports find the row by it (lessons.services.imports).

The column comes with a database default, `gen_random_uuid()`: PostgreSQL computes it for each
stored row as it adds the column (a callable default alone is computed once by Django, which would
give every row the same uid), and a writer that names no uid (a server still running the earlier
code during a deploy) gets a fresh one too. The unique indexes are built CONCURRENTLY (no write
lock on a large table), so this migration is not atomic.
"""

import uuid

from django.contrib.postgres.functions import RandomUUID
from django.db import migrations, models

CURRENT = models.Q(("current_version__isnull", True))
UID = models.UUIDField(default=uuid.uuid4, db_default=RandomUUID(), editable=False)


def _unique_index(*, table: str, name: str, where: str = "") -> migrations.RunSQL:
    return migrations.RunSQL(
        f"CREATE UNIQUE INDEX CONCURRENTLY IF NOT EXISTS {name} ON {table} (team_id, uid){where}",
        f"DROP INDEX CONCURRENTLY IF EXISTS {name}",
    )


class Migration(migrations.Migration):
    atomic = False

    dependencies = [("lessons", "0025_memory_list_orders_indexed")]

    operations = [
        migrations.AddField(model_name="lesson", name="uid", field=UID),
        migrations.AddField(model_name="memory", name="uid", field=UID),
        # The lesson's constraint takes its index over once built; the memory's is a partial unique
        # index, which is how Django keeps a conditional unique constraint on PostgreSQL.
        migrations.SeparateDatabaseAndState(
            database_operations=[
                _unique_index(table="lessons_lesson", name="lesson_uid_unique_per_team"),
                migrations.RunSQL(
                    "ALTER TABLE lessons_lesson ADD CONSTRAINT lesson_uid_unique_per_team "
                    "UNIQUE USING INDEX lesson_uid_unique_per_team",
                    "ALTER TABLE lessons_lesson DROP CONSTRAINT IF EXISTS lesson_uid_unique_per_team",
                ),
                _unique_index(table="lessons_memory", name="memory_uid_unique_per_team",
                              where=" WHERE current_version_id IS NULL"),
            ],
            state_operations=[
                migrations.AddConstraint(
                    model_name="lesson",
                    constraint=models.UniqueConstraint(fields=("team", "uid"), name="lesson_uid_unique_per_team"),
                ),
                migrations.AddConstraint(
                    model_name="memory",
                    constraint=models.UniqueConstraint(condition=CURRENT, fields=("team", "uid"),
                                                       name="memory_uid_unique_per_team"),
                ),
            ],
        ),
    ]
