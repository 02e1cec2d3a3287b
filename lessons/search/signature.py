"""Filter signatures: which rows a keyword posting may belong to, read without visiting the row.

Every posting carries a 64-bit Bloom signature of its row's values of the filters that test
equality (migration 0011; lessons: status, category, tech stacks, project types, tags; memories:
current or a version, categories, emotions, people). Each value sets three bits, picked by the
first three bytes of md5('field:value'), each mod 64: `lessons_keyword_facet` in SQL, `value_bits`
here, the same arithmetic.

A filter is an AND of equality tests, each an OR over allowed values. A row passing it carries, for
every test, all three bits of one allowed value; a posting whose signature does not cannot belong
to a row the filter keeps, so the keyword leg skips it while it reads a term's best postings
(keyword.py). The converse does not hold: other values may have set those bits. A rejected row
slips through with chance about (bits set / 64)^3: 1 in 130 for bench_search's lessons (12.5 bits
set on average, measured), about 1 in 20 for a row with ten values (24 bits). So the exact filter
is still checked, now on rows that nearly all pass. A posting whose signature is -1 (every bit:
written by a path that did not compute it) passes every test.
"""

from collections.abc import Sequence
from hashlib import md5

BITS_PER_VALUE = 3
SIGNATURE_BITS = 64


def value_bits(field: str, value: str) -> int:
    """The bits of one filter value, as PostgreSQL's signed bigint."""
    digest = md5(f"{field}:{value}".encode()).digest()
    bits = 0
    for byte in digest[:BITS_PER_VALUE]:
        bits |= 1 << (byte % SIGNATURE_BITS)
    return bits - (1 << SIGNATURE_BITS) if bits >= 1 << (SIGNATURE_BITS - 1) else bits


def signature_sql(masks: Sequence[Sequence[int]], *, column: str) -> str:
    """A boolean SQL expression: `column` carries, for every test, all bits of one of its masks.
    The masks are integers this module computed, written into the SQL as literals."""
    tests = []
    for allowed in masks:
        if not allowed:
            return "false"  # a test no value can pass: the filter keeps no row
        tests.append("(" + " OR ".join(f"({column} & {int(mask)}::bigint) = {int(mask)}::bigint"
                                       for mask in allowed) + ")")
    return " AND ".join(tests) or "true"
