"""An index of the team's words spelled with punctuation ("next.js", "react-native"), by the term
they compare as (lessons.search.kinds.canonical: "nextjs"): a short query's exact terms look up
the team's stored spellings here, so `nextjs` finds the lessons whose tech stack says `next.js`
(lessons/search/spellings.py). Partial: only such words, a small share of any team's vocabulary."""

from django.db import migrations

INDEX = "lessons_keyword_df_spellings"
# As lessons.search.spellings writes them (SPELLING_TERM, SPELLING_INDEX_PREDICATE): its lookup must
# imply this predicate for the planner to read the index (tests/search/test_spellings.py checks it).
SPELLING_TERM = "regexp_replace(lexeme, '[^a-z0-9+#]', '', 'g')"
SPELLING_INDEX_PREDICATE = "lexeme ~ '^[a-z0-9+#._-]+$' AND lexeme ~ '[a-z0-9][._-]+[a-z0-9]'"


class Migration(migrations.Migration):
    dependencies = [("lessons", "0022_unaccent")]

    operations = [
        migrations.RunSQL(
            f"CREATE INDEX {INDEX} ON lessons_keyword_df (kind, team_id, ({SPELLING_TERM}))"
            f" WHERE {SPELLING_INDEX_PREDICATE}",
            f"DROP INDEX {INDEX}",
        )
    ]
