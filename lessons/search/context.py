"""Keywords from the caller's situation (`context`: editor contents, a file, a conversation), seed 001.

At most MAX_KEYWORDS, most telling first: called function names, quoted strings, file names, then
identifiers (camelCase, snake_case, dotted names), then other words, each kind by frequency. English
stop words and programming-language keywords are dropped: they would only add noise to the
contextual query.
"""

import re
from collections import Counter

MAX_KEYWORDS = 10

STOP_WORDS = frozenset(
    """
    a about above after again against all also am an and any are as at be because been before being
    below between both but by can could did do does doing down during each few for from further had has
    have having he her here hers herself him himself his how i if in into is it its itself just me more
    most my myself no nor not now of off on once only or other our ours ourselves out over own same she
    should so some such than that the their theirs them themselves then there these they this those
    through to too under until up very was we were what when where which while who whom why will with
    would you your yours yourself yourselves let lets get got use used using want need make like one two
    new way thing things still even much many well yes ok okay please thanks
    def return const var function import from class self true false null none undefined async await
    export default public private static void int str string bool boolean float print println elif else
    try except catch finally throw raise new this super extends implements interface type enum struct
    pass break continue yield lambda with as is not and or in of for while if then end do begin
    """.split()
)

_CALL = re.compile(r"(?<![\w$])\.?([A-Za-z_$][\w$]*)\s*\(")
_QUOTED = re.compile(r"""(?:"([^"\n]{2,60})"|'([^'\n]{2,60})'|`([^`\n]{2,60})`)""")
_FILE = re.compile(r"(?<![\w/.-])((?:[\w.-]+/)*[\w-]+\.(?:py|js|jsx|ts|tsx|go|rs|rb|java|kt|sql|json|ya?ml|toml|md|css|scss|html|sh|env|cfg|ini|txt|vue|svelte|php|c|h|cpp|cs|swift))\b")
_IDENTIFIER = re.compile(r"\b([A-Za-z_][A-Za-z0-9]*(?:[_.][A-Za-z0-9]+)+|[a-z]+[A-Z][A-Za-z0-9]*|[A-Z][a-z0-9]+[A-Z][A-Za-z0-9]*)\b")
_WORD = re.compile(r"\b([A-Za-z][A-Za-z0-9+#-]{2,})\b")


# A longer "word" is a token, a hash or pasted noise: a 50,000-letter one became one keyword and a
# contextual query 25 times the query limit.
MAX_KEYWORD_CHARS = 60


def _keep(term: str) -> bool:
    plain = term.strip().strip(".-_").lower()
    return 2 <= len(plain) <= MAX_KEYWORD_CHARS and plain not in STOP_WORDS and not plain.isdigit()


def extract_keywords(context: str, *, limit: int = MAX_KEYWORDS) -> list[str]:
    """Up to `limit` distinct keywords from `context`, most telling first."""
    if not context or not context.strip():
        return []
    kinds: list[list[str]] = [
        [m.group(1) for m in _CALL.finditer(context)],
        [next(g for g in m.groups() if g) for m in _QUOTED.finditer(context)],
        [m.group(1).rsplit("/", 1)[-1] for m in _FILE.finditer(context)],
        [m.group(1) for m in _IDENTIFIER.finditer(context)],
        [m.group(1) for m in _WORD.finditer(context)],
    ]
    chosen: dict[str, str] = {}  # lowercased -> as written
    for found in kinds:
        for term, _count in Counter(t.strip() for t in found if _keep(t)).most_common():
            key = term.lower()
            if key in chosen or any(key in seen.split() for seen in chosen):
                continue
            chosen[key] = term
            if len(chosen) >= limit:
                return list(chosen.values())
    return list(chosen.values())


def contextual_query(query: str, keywords: list[str]) -> str:
    """The primary query followed by the context's keywords (seed 001's 'contextual' search)."""
    return " ".join([query.strip(), *keywords]).strip()
