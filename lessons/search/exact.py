"""The exact-term leg: rows carrying every query term as an exact term (tags, tech stacks,
category; a memory's categories and emotions), found on the GIN indexes of those arrays.

They are the rows the exact-term tier ranks first (seed 000: `nextjs` returns every Next.js
lesson before unrelated semantic neighbours), made candidates even when neither other leg
reached them.
"""

from lessons.search.kinds import SearchKind

# Only short queries form a tier: a tag, a tech stack, a title word or two.
EXACT_TIER_MAX_TERMS = 3


def exact_leg_sql(*, kind: SearchKind, terms: list[str], forms: dict[str, list[str]], filter_sql: str,
                  filter_params: list, limit: int) -> tuple[str, list]:
    """One SELECT (id) of the rows carrying every term in one of its stored spellings."""
    conditions, params = [], []
    for term in terms:
        variants = sorted({*forms.get(term, [term]), term.replace("+", "")})
        alternatives = [f"t.{column} && %s::varchar[]" for column in kind.exact_arrays]
        alternatives += [f"t.{column} = ANY(%s::varchar[])" for column in kind.exact_scalars]
        conditions.append("(" + " OR ".join(alternatives) + ")")
        params.extend([variants] * len(alternatives))
    sql = (f"SELECT t.id FROM {kind.table} AS t WHERE {filter_sql} AND {' AND '.join(conditions)}"
           f" ORDER BY {kind.exact_order} LIMIT %s")
    return sql, [*filter_params, *params, limit]
