"""Forget the "not a duplicate" marks of rows deleted before deletes forgot them (only a merge did):
the marks list showed them as "#12 (deleted)" and the duplicates page counted them."""

from django.db import migrations

FORGET = """
DELETE FROM lessons_duplicatedismissal AS d
 WHERE (d.kind = 'lesson' AND (NOT EXISTS (SELECT 1 FROM lessons_lesson WHERE id = d.low_id)
                               OR NOT EXISTS (SELECT 1 FROM lessons_lesson WHERE id = d.high_id)))
    OR (d.kind = 'memory' AND (NOT EXISTS (SELECT 1 FROM lessons_memory WHERE id = d.low_id)
                               OR NOT EXISTS (SELECT 1 FROM lessons_memory WHERE id = d.high_id)))
"""


class Migration(migrations.Migration):
    dependencies = [("lessons", "0026_row_uids")]

    operations = [migrations.RunSQL(FORGET, reverse_sql=migrations.RunSQL.noop)]
