"""The stored spellings of terms that the keyword vocabulary cannot hold: "error handling",
"back_off", "node js", "socket.io-client", each by the term it compares as (lessons.search.kinds.
canonical: "errorhandling"), per kind and team, in `lessons_term_spelling`.

lessons/search/spellings.py found a term's other spellings in the vocabulary (lessons_keyword_df,
migration 0023), whose 'simple' lexemes keep "next.js" and "react-native" whole; but the text parser
splits "error handling", "back_off" and "socket.io-client" into words, so the filter `tag=error-handling`
missed the lessons tagged "error handling", and `tech_stack=nodejs` those saying "node js". This table
holds just those spellings (a value differing from its term that is not one lexeme the vocabulary's
spellings index reads), so the lookup stays one probe of each of two small indexes.

Triggers note a row's spellings as it is inserted, or updated with other terms or another team
(INSERT per statement, as the keyword index does; UPDATE per row and only then: most updates touch
counters or embeddings). Nothing is removed when a row is edited or deleted: a spelling no row
carries any more is only one more allowed value of a filter's equality test (and one more variant of
the exact-term leg), which matches no row, so keeping it is harmless, while knowing it is gone would
mean looking for it in the team's rows. Two writers noting the same new spelling at once may both note
it (note_spellings_sql says why), which is as harmless. A deleted team's spellings go with it.
"""

from django.db import migrations

TABLE = "lessons_term_spelling"
# As lessons.search.kinds.canonical reads a term (stored terms are ASCII: lessons.models.short_term_validator)
TERM = "regexp_replace(lower(lessons_keyword_text({})), '[^a-z0-9+#]', '', 'g')"
# A value the vocabulary's spellings index holds (migration 0023's predicate, over the value): one
# lexeme of its own 'simple' vector, as the row's search vector reads it
HELD_BY_VOCABULARY = ("value ~ '^[a-z0-9+#._-]+$' AND value ~ '[a-z0-9][._-]+[a-z0-9]'"
                      " AND value = ANY(tsvector_to_array(to_tsvector('simple', lessons_keyword_text(value))))")
# kind, table, the columns holding a row's terms (lessons.search.kinds: exact_arrays and exact_scalars,
# and the lessons' project types, which filters read)
KINDS = (
    ("l", "lessons_lesson", ("tags", "tech_stacks", "project_types"), "category"),
    ("m", "lessons_memory", ("categories", "emotions"), None),
)


def _terms_of(kind: str, row: str) -> str:
    """A row's term values as one varchar[]."""
    [(_, _, arrays, scalar)] = [entry for entry in KINDS if entry[0] == kind]
    return " || ".join([*(f"{row}.{column}" for column in arrays), *([f"ARRAY[{row}.{scalar}]"] if scalar else [])])


def note_spellings_sql(kind: str, rows: str) -> str:
    """An INSERT of the spellings the rows `rows` (a FROM item aliased `n`) carry that the table lacks.
    The cheap test first, so a plain word is never parsed; then each distinct value parsed once
    (materialized: pushed down to the row values, the parse ran once per row, 5.3 s against 3.9 s
    for 170,000 lessons read cold). No unique key: two writers noting the same new spelling at once
    would wait on each other (and deadlock, each holding the key the other notes next); instead both
    note it, and the lookup's UNION reads it once."""
    return f"""
        WITH carried AS MATERIALIZED (
            SELECT DISTINCT n.team_id, s.spelling::text AS spelling FROM {rows}
             CROSS JOIN LATERAL unnest({_terms_of(kind, "n")}) AS s(spelling)
             WHERE s.spelling ~ '[^a-z0-9+#]'
        ), spelled AS MATERIALIZED (
            SELECT c.team_id, c.spelling, lessons_spelling_term(c.spelling) AS term FROM carried AS c
        )
        INSERT INTO {TABLE} (kind, team_id, term, spelling)
        SELECT '{kind}', s.team_id, s.term, s.spelling FROM spelled AS s
         WHERE s.term IS NOT NULL AND NOT EXISTS (
               SELECT 1 FROM {TABLE} AS t
                WHERE t.kind = '{kind}' AND t.team_id = s.team_id AND t.term = s.term AND t.spelling = s.spelling)"""


def forward_sql() -> str:
    statements = [
        f"""CREATE TABLE {TABLE} (
            kind     "char" NOT NULL,  -- 'l' lesson, 'm' memory, as lessons_keyword_df
            team_id  bigint NOT NULL,
            term     text   NOT NULL,
            spelling text   NOT NULL
        )""",
        f"CREATE INDEX {TABLE}_lookup ON {TABLE} (kind, team_id, term, spelling)",
        f"""CREATE FUNCTION lessons_spelling_term(value text) RETURNS text
            LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
            SELECT t.term FROM (SELECT {TERM.format("value")} AS term) AS t
             WHERE t.term <> '' AND t.term <> value AND NOT ({HELD_BY_VOCABULARY})
        $$""",
        f"""CREATE FUNCTION lessons_term_spellings_forget_teams() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            DELETE FROM {TABLE} AS s USING old_teams AS o WHERE s.kind = ANY('{{l,m}}') AND s.team_id = o.id;
            RETURN NULL;
        END $$""",
        """CREATE TRIGGER lessons_team_term_spellings_forget AFTER DELETE ON lessons_team
            REFERENCING OLD TABLE AS old_teams FOR EACH STATEMENT
            EXECUTE FUNCTION lessons_term_spellings_forget_teams()""",
    ]
    for kind, table, arrays, scalar in KINDS:
        changed = " OR ".join(f"OLD.{column} IS DISTINCT FROM NEW.{column}"
                              for column in (*arrays, *([scalar] if scalar else []), "team_id"))
        statements += [
            f"""CREATE FUNCTION {table}_spellings_note() RETURNS trigger LANGUAGE plpgsql AS $$
            BEGIN
                IF TG_LEVEL = 'STATEMENT' THEN
                    {note_spellings_sql(kind, "new_rows AS n")};
                ELSE
                    {note_spellings_sql(kind, "(SELECT NEW.*) AS n")};
                END IF;
                RETURN NULL;
            END $$""",
            f"""CREATE TRIGGER {table}_spellings_insert AFTER INSERT ON {table}
                REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION {table}_spellings_note()""",
            f"""CREATE TRIGGER {table}_spellings_update AFTER UPDATE ON {table}
                FOR EACH ROW WHEN ({changed}) EXECUTE FUNCTION {table}_spellings_note()""",
        ]
    return ";\n".join(statements)


def reverse_sql() -> str:
    statements = [f"DROP TRIGGER {table}_spellings_{event} ON {table}"
                  for _, table, _, _ in KINDS for event in ("insert", "update")]
    statements += [f"DROP FUNCTION {table}_spellings_note()" for _, table, _, _ in KINDS]
    statements += ["DROP TRIGGER lessons_team_term_spellings_forget ON lessons_team",
                   "DROP FUNCTION lessons_term_spellings_forget_teams()",
                   "DROP FUNCTION lessons_spelling_term(text)", f"DROP TABLE {TABLE}"]
    return ";\n".join(statements)


def note_stored_spellings(apps, schema_editor):
    """The spellings of the rows stored before this migration (a version of a memory included: its
    spellings are harmless, as a deleted row's are)."""
    with schema_editor.connection.cursor() as cursor:
        for kind, table, _, _ in KINDS:
            cursor.execute(note_spellings_sql(kind, f"{table} AS n"))


class Migration(migrations.Migration):
    dependencies = [("lessons", "0028_keyword_text")]

    operations = [
        migrations.RunSQL(forward_sql(), reverse_sql=reverse_sql()),
        migrations.RunPython(note_stored_spellings, migrations.RunPython.noop),
    ]
