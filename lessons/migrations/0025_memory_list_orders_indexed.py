"""Indexes that give `GET /memories` its pages in each of its orders (-updated_at, occurred_at and
-occurred_at, -importance), over a team's current memories.

The list reads `current_version IS NULL`, which is no equality, so memory_team_recent (team,
current_version, -updated_at) could not give rows in order: every page of a team's memories was
a sort of all of them (45-53 ms at 100,000 memories, whatever the order). Partial indexes on the
current memories give a page in 1.6-1.9 ms. The timeline's index holds coalesce(occurred_at,
created_at), the moment the lists, the since/until filters and the recent-events listing read, so
memory_team_occurred (occurred_at alone, versions included) is dropped with memory_team_recent.

Built and dropped CONCURRENTLY (no write lock on a large table), so this migration is not atomic.
"""

import django.db.models.functions.comparison
from django.contrib.postgres.operations import AddIndexConcurrently, RemoveIndexConcurrently
from django.db import migrations, models

CURRENT = models.Q(("current_version__isnull", True))


class Migration(migrations.Migration):
    atomic = False

    dependencies = [("lessons", "0024_people_signatures_unaccented")]

    operations = [
        AddIndexConcurrently(
            model_name="memory",
            index=models.Index(
                models.F("team"), models.OrderBy(models.F("updated_at"), descending=True),
                models.OrderBy(models.F("id"), descending=True), condition=CURRENT, name="memory_current_recent",
            ),
        ),
        AddIndexConcurrently(
            model_name="memory",
            index=models.Index(
                models.F("team"), django.db.models.functions.comparison.Coalesce("occurred_at", "created_at"),
                models.F("id"), condition=CURRENT, name="memory_current_timeline",
            ),
        ),
        AddIndexConcurrently(
            model_name="memory",
            index=models.Index(
                models.F("team"), models.OrderBy(models.F("importance"), descending=True),
                models.OrderBy(models.F("updated_at"), descending=True),
                models.OrderBy(models.F("id"), descending=True), condition=CURRENT, name="memory_current_importance",
            ),
        ),
        RemoveIndexConcurrently(model_name="memory", name="memory_team_recent"),
        RemoveIndexConcurrently(model_name="memory", name="memory_team_occurred"),
    ]
