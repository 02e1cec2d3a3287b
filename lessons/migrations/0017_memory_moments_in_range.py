"""Dates that earlier versions stored but Python cannot read back, brought into range.

Before migration 0013 the services accepted any moment PostgreSQL could store, so
"0001-01-01T01:00:00+05:00" (how a .NET client sends an empty date) became year 1 BC in UTC and
"9999-12-31T23:00:00-05:00" year 10000. Every read of such a row failed: the admin's memory list
answered 500 for every team, the API 422, and the row could be neither edited nor deleted.

Each such `occurred_at` becomes the nearest moment Python reads (0001-01-01 or 9999-12-31
23:59:59.999999 UTC): a few hours off a date that meant "unknown" or "never", with its order kept.
`updated_at` is left alone: the memory did not change for its owner.
"""

from django.db import migrations

FIRST = "0001-01-01 00:00:00+00"
LAST = "9999-12-31 23:59:59.999999+00"


def bring_moments_into_range(apps, schema_editor):
    with schema_editor.connection.cursor() as cursor:
        cursor.execute(
            "UPDATE lessons_memory SET occurred_at = CASE WHEN occurred_at < %s THEN %s::timestamptz"
            " ELSE %s::timestamptz END WHERE occurred_at < %s OR occurred_at > %s",
            [FIRST, FIRST, LAST, FIRST, LAST],
        )


class Migration(migrations.Migration):
    dependencies = [("lessons", "0016_fuzzystrmatch")]

    operations = [migrations.RunPython(bring_moments_into_range, migrations.RunPython.noop)]
