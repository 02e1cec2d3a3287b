"""People's names compare in their Unicode compatibility form (NFKC), as search and the lists' text filter
already read text (migration 0030). unaccent() folds full-width Latin ("Ｓａｍ", as a Chinese or Japanese
keyboard types it, is already sam) but not half-width Katakana: a memory listing "ｱｷﾗ" was another person
than アキラ in the friends listing, and the person search and the `people` filter asked for one missed
the other; so did a circled letter or a superscript digit ("Ⓢam", "Sam²").

- `lessons_folded_name(text)`: a name as the people filters, the person search and the friends listing
  compare it (lessons/search/filters.py FOLDED_NAME): compatibility form, lowercased, without accents.
  `lessons_folded_names(varchar[])` folds each name of a `people` array; `memory_folded_people_gin`
  indexes it, so "which memories list this person" no longer folds every name of the team.
- `lessons_person_text(content, details)`: a memory's text as the person search looks for a name in
  it, in the compatibility form and without accents; `memory_person_text_trgm` (pg_trgm, migration
  0001) indexes it, so the search's regular expression for a name reads only the rows holding its
  trigrams: counting the memories about someone on a 100,000-memory team read every text (1.3 s).
- a memory's people enter its keyword postings' filter signature folded the same way (migration
  0024): a `people` filter naming "Sam" skips postings whose signature lacks `sam`. Only postings of
  memories naming someone outside the compatibility form are re-signed.

The functions are IMMUTABLE (an index needs it; unaccent() is STABLE, as for lessons_keyword_text in
0028) and name every schema they use: PostgreSQL builds and analyses an index with an empty
search_path. They are PL/pgSQL: PostgreSQL inlines no SQL function that calls a STABLE one, and called
per row a SQL function's body cost twice as much. normalize() needs a UTF8 database; on another encoding
(which cannot store these characters) the names fold as before, without the form. An ASCII text, or one
already in the form, skips normalize(): it cost 5 us a text, the checks 1 us.

Reversing drops the indexes and functions and signs people as 0024 did.
"""

from importlib import import_module

from django.db import migrations

INDEXES = (
    ("memory_folded_people_gin", "gin ({schema}.lessons_folded_names(people))"),
    ("memory_person_text_trgm", "gin ({schema}.lessons_person_text(content, details) {trgm}.gin_trgm_ops)"),
)
# A text in its compatibility form; an ASCII text (most) or one already in the form is as it is.
FORM = ("CASE WHEN pg_catalog.octet_length({0}) = pg_catalog.length({0}) OR {0} IS NFKC NORMALIZED THEN {0}"
        " ELSE pg_catalog.normalize({0}, 'NFKC') END")
# The signature as 0024 defines it, its people folded as given (PEOPLE) instead of unaccent(lower(...)).
SIGNATURE = import_module("lessons.migrations.0024_people_signatures_unaccented").FOLDED.replace(
    "unaccent(lower(unnest(r.people)))", "PEOPLE")
RESIGN = (
    "UPDATE lessons_keyword_posting AS p SET signature = lessons_keyword_signature(m) FROM lessons_memory AS m"
    " WHERE p.kind = 'm' AND p.row_id = m.id AND NOT (lessons_array_as_text(m.people) IS NFKC NORMALIZED)"
)


def _schema_of(cursor, extension: str) -> str:
    cursor.execute("SELECT extnamespace::regnamespace::text FROM pg_extension WHERE extname = %s", [extension])
    return cursor.fetchone()[0]  # unaccent: migration 0022; pg_trgm: 0001


def fold_names_in_compatibility_form(apps, schema_editor):
    with schema_editor.connection.cursor() as cursor:
        cursor.execute("SELECT current_schema(), current_setting('server_encoding') = 'UTF8'")
        schema, utf8 = cursor.fetchone()
        unaccent, trgm = _schema_of(cursor, "unaccent"), _schema_of(cursor, "pg_trgm")
        form = FORM if utf8 else "{0}"
        without_accents = f"{unaccent}.unaccent('{unaccent}.unaccent'::regdictionary, {{}})"
        folded = without_accents.format(f"pg_catalog.lower({form.format('spelling')})")
        cursor.execute(
            "CREATE FUNCTION lessons_folded_name(spelling text) RETURNS text LANGUAGE plpgsql IMMUTABLE STRICT"
            f" PARALLEL SAFE AS $$ BEGIN RETURN {folded}; END $$"
        )
        cursor.execute(
            "CREATE FUNCTION lessons_folded_names(names varchar[]) RETURNS text[] LANGUAGE plpgsql IMMUTABLE STRICT"
            " PARALLEL SAFE AS $$ DECLARE folded text[] := '{}'; spelling text; BEGIN"
            f" FOREACH spelling IN ARRAY names LOOP folded := folded || {folded}; END LOOP; RETURN folded; END $$"
        )
        cursor.execute(
            "CREATE FUNCTION lessons_person_text(content text, details text) RETURNS text LANGUAGE plpgsql"
            " IMMUTABLE STRICT PARALLEL SAFE AS $$ DECLARE joined text := content || ' ' || details;"
            f" BEGIN RETURN {without_accents.format(form.format('joined'))}; END $$"
        )
        for name, definition in INDEXES:
            cursor.execute(f"CREATE INDEX {name} ON lessons_memory USING {definition.format(schema=schema, trgm=trgm)}")
        cursor.execute(SIGNATURE.replace("PEOPLE", f"{schema}.lessons_folded_name(unnest(r.people))"))
        if utf8:
            cursor.execute(RESIGN)


def fold_names_as_before(apps, schema_editor):
    with schema_editor.connection.cursor() as cursor:
        cursor.execute("SELECT current_setting('server_encoding') = 'UTF8'")
        [utf8] = cursor.fetchone()
        cursor.execute(SIGNATURE.replace("PEOPLE", "unaccent(lower(unnest(r.people)))"))
        if utf8:
            cursor.execute(RESIGN)
        for name, _ in INDEXES:
            cursor.execute(f"DROP INDEX IF EXISTS {name}")
        cursor.execute("DROP FUNCTION IF EXISTS lessons_person_text(text, text)")
        cursor.execute("DROP FUNCTION IF EXISTS lessons_folded_names(varchar[])")
        cursor.execute("DROP FUNCTION IF EXISTS lessons_folded_name(text)")


class Migration(migrations.Migration):

    dependencies = [
        ("lessons", "0032_terms_may_start_with_a_dot"),
    ]

    operations = [
        migrations.RunPython(fold_names_in_compatibility_form, fold_names_as_before),
    ]
