"""Embeddings stay in the row (storage MAIN), not in the TOAST table.

pgvector's `vector` type defaults to EXTERNAL storage: a row over PostgreSQL's 2 KB TOAST target
(every lesson with a few paragraphs of text) has its 1,540-byte embedding moved out of line first,
and every cosine computed from the table then reads the TOAST index and a TOAST page. On SciFact
(5,183 lessons) an exact nearest-neighbour scan of the team read 40,746 buffers in 40 ms; with the
embedding in the row, 1,390 buffers in 5 ms. MAIN moves the long text out instead (and the vector
too only as a last resort, so no row is ever refused, unlike PLAIN).

Only rows written from now on are laid out this way: `VACUUM FULL lessons_lesson, lessons_memory`
(an exclusive lock while it runs) rewrites the rows already stored (README, Upgrading).
"""

from django.db import migrations

TABLES = ("lessons_lesson", "lessons_memory")


class Migration(migrations.Migration):
    dependencies = [("lessons", "0007_api_key_active_prefix")]

    operations = [
        migrations.RunSQL(
            sql=[f"ALTER TABLE {table} ALTER COLUMN embedding SET STORAGE MAIN" for table in TABLES],
            reverse_sql=[f"ALTER TABLE {table} ALTER COLUMN embedding SET STORAGE EXTERNAL" for table in TABLES],
        ),
    ]
