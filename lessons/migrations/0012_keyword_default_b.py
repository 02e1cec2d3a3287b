"""BM25's length normalisation b moves from 0.5 to 0.3 (settings.SEARCH_BM25; measured on every dev
set through the hybrid, README Quality).

Posting impacts are computed in the database with the parameters of their team's reference row
(migration 0006), and a team's first rows write that row with the defaults spelled out in
`lessons_keyword_apply`. So the default changes there too, and every team whose impacts were
computed with the old defaults is refreshed here, as migration 0006 did: until then its keyword
answers would be exact but never proved by the heads (every search a whole-list scan). A team
refreshed by an operator with other parameters is left as it is. The refresh rewrites each
posting's impact (about 15 us a posting: SciFact's 493,585 in 7-8 s here; writers to a team wait
while its postings are rewritten, searches do not).
"""

import importlib

from django.db import migrations

_0011 = importlib.import_module("lessons.migrations.0011_keyword_posting_signatures")

OLD = (1.2, 0.5, 1.5, 1.0, 0.5, 1.0)  # k1, b, w_a, w_b, w_c, w_d
NEW = (1.2, 0.3, 1.5, 1.0, 0.5, 1.0)


def _sql_list(values: tuple[float, ...]) -> str:
    return ", ".join(repr(value) for value in values)


def _apply_with_defaults(values: tuple[float, ...]) -> str:
    return _0011._edited(_0011.APPLY_WITH_SIGNATURES, [(_sql_list(OLD), _sql_list(values))])


def _refresh(source: tuple[float, ...], target: tuple[float, ...]) -> str:
    return f"""
SELECT lessons_keyword_refresh_impacts(kind, team_id, {_sql_list(target)})
  FROM lessons_keyword_reference WHERE (k1, b, w_a, w_b, w_c, w_d) = ({_sql_list(source)});
"""


class Migration(migrations.Migration):
    dependencies = [("lessons", "0011_keyword_posting_signatures")]

    operations = [
        migrations.RunSQL(_apply_with_defaults(NEW) + _refresh(OLD, NEW),
                          reverse_sql=_apply_with_defaults(OLD) + _refresh(NEW, OLD)),
    ]
