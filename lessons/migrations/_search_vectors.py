"""Rebuilding the stored search vectors after their expression changed (migrations 0018, 0028).

Not a migration: the loader skips modules whose name starts with `_`.

A stored generated column cannot take a new expression before PostgreSQL 17 (and Django does not
alter one), so the column is dropped and added again: the triggers and indexes that name it are
read from the catalogue and created again as they were. The keyword index's postings of the rows
whose vector changes are taken out with their old vectors and put back with their new ones, by the
function the triggers use (migrations 0006, 0011); other rows' postings stay as they are. The
table is rewritten, under an exclusive lock (seconds for SciFact's 5,183 lessons).
"""


def rebuild_search_vectors(apps, schema_editor, *, tables):
    """`tables`: (table, keyword index kind, model name, a condition on `t` true for the rows
    whose vector the new expression changes)."""
    with schema_editor.connection.cursor() as cursor:
        for table, kind, model_name, changes in tables:
            changing = f"FROM {table} AS t WHERE {changes}"
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
