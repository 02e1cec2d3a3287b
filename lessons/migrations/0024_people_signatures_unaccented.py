"""A memory's people enter its keyword postings' filter signature as the `people` filter compares
them: lowercased and without their accents (unaccent, 0022). The filter now finds "Zoë" for "Zoe",
as the friends listing and a person search already did; a signature of "zoë" would have let the
keyword leg skip that memory's postings for a filter naming "Zoe" (lessons/search/signature.py).

Only postings of memories naming someone outside ASCII are re-signed: every other name folds to
itself."""

from django.db import migrations

FOLDED = r"""
CREATE OR REPLACE FUNCTION lessons_keyword_signature(r lessons_memory) RETURNS bigint
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT coalesce(bit_or(lessons_keyword_facet(f.field, f.value)), 0)
      FROM (SELECT 'current', CASE WHEN r.current_version_id IS NULL THEN 'yes' END
            UNION ALL SELECT 'categories', unnest(r.categories)
            UNION ALL SELECT 'emotions', unnest(r.emotions)
            UNION ALL SELECT 'people', unaccent(lower(unnest(r.people)))) AS f(field, value)
$$;
"""

AS_BEFORE = FOLDED.replace("unaccent(lower(unnest(r.people)))", "lower(unnest(r.people))")

RESIGN_NON_ASCII = r"""
UPDATE lessons_keyword_posting AS p SET signature = lessons_keyword_signature(m)
  FROM lessons_memory AS m
 WHERE p.kind = 'm' AND p.row_id = m.id AND m.people::text ~ '[^\x01-\x7f]';
"""


class Migration(migrations.Migration):
    dependencies = [("lessons", "0023_keyword_spellings")]

    operations = [migrations.RunSQL(FOLDED + RESIGN_NON_ASCII, AS_BEFORE + RESIGN_NON_ASCII)]
