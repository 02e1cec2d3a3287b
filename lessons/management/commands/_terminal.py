"""Stored text on an operator's terminal: characters a terminal acts on instead of showing (C0/C1
controls: colours, a new window title, a carriage return that overwrites the line; line and
paragraph separators; the bidirectional overrides that reorder a line) are shown as escapes. A
stored title or a key's name is anyone's text. Tables show Python escapes, `--json` JSON's \\u
escapes (the same strings to a JSON reader)."""

import re

BEYOND_C0 = "\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069"
UNPRINTABLE = re.compile(f"[\x00-\x1f{BEYOND_C0}]")
# json.dumps escapes C0 controls itself, and its own line breaks are the indentation
UNPRINTABLE_IN_JSON = re.compile(f"[{BEYOND_C0}]")


def printable(text: str) -> str:
    return UNPRINTABLE.sub(lambda match: match.group().encode("unicode_escape").decode("ascii"), text)
