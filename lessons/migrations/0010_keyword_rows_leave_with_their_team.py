"""A deleted team's keyword bookkeeping goes with it.

`lessons_keyword_df`, `lessons_keyword_stats` and `lessons_keyword_reference` are keyed by team
but carry no foreign key (the triggers write them inside every insert, migration 0006). Deleting a
team's rows brings its counts to zero but leaves the rows. Deleting the team itself left them
for good: four deleted 100,000- and 300,000-lesson bench teams had left 1.2 million document
frequency rows (189 MB), all at zero.

Now a statement trigger on the team table deletes them with the team, however it is deleted (the
admin, a service, raw SQL). The migration also deletes what teams deleted before it left behind.
"""

from django.db import migrations

FORWARD_SQL = r"""
CREATE FUNCTION lessons_keyword_forget_teams() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    -- kind = ANY(...) lets the (kind, team_id, ...) primary keys serve the team alone
    DELETE FROM lessons_keyword_df AS d USING old_teams AS o WHERE d.kind = ANY('{l,m}') AND d.team_id = o.id;
    DELETE FROM lessons_keyword_stats AS s USING old_teams AS o WHERE s.kind = ANY('{l,m}') AND s.team_id = o.id;
    DELETE FROM lessons_keyword_reference AS r USING old_teams AS o WHERE r.kind = ANY('{l,m}') AND r.team_id = o.id;
    RETURN NULL;
END $$;

CREATE TRIGGER lessons_team_keyword_forget AFTER DELETE ON lessons_team
    REFERENCING OLD TABLE AS old_teams FOR EACH STATEMENT EXECUTE FUNCTION lessons_keyword_forget_teams();

DELETE FROM lessons_keyword_df AS d WHERE NOT EXISTS (SELECT 1 FROM lessons_team AS t WHERE t.id = d.team_id);
DELETE FROM lessons_keyword_stats AS s WHERE NOT EXISTS (SELECT 1 FROM lessons_team AS t WHERE t.id = s.team_id);
DELETE FROM lessons_keyword_reference AS r WHERE NOT EXISTS (SELECT 1 FROM lessons_team AS t WHERE t.id = r.team_id);
"""

REVERSE_SQL = r"""
DROP TRIGGER lessons_team_keyword_forget ON lessons_team;
DROP FUNCTION lessons_keyword_forget_teams();
"""


class Migration(migrations.Migration):
    dependencies = [("lessons", "0009_filter_columns_indexes")]

    operations = [migrations.RunSQL(FORWARD_SQL, reverse_sql=REVERSE_SQL)]
