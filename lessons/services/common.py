"""Small helpers shared by the write services."""

import unicodedata
from collections.abc import Iterable


# Invisible characters with no say in how a text reads: zero-width space, word joiner, a stray
# byte-order mark. Pasted into a word ("pass\u200bword") they hid it from every word search, and a
# title of nothing else was stored as an invisible title. (Zero-width joiners stay: emoji and some
# scripts need them.)
INVISIBLE = dict.fromkeys(map(ord, "\u200b\u2060\ufeff"))


def normalise_text(value) -> str:
    """A free text (a title, a description, a memory's content) as stored: one Unicode form (NFC),
    without invisible characters, trimmed. macOS keyboards send "crème" with a combining accent;
    stored as sent, a search or a filter typed the other way missed it."""
    return unicodedata.normalize("NFC", str(value)).translate(INVISIBLE).strip()


def normalise_terms(values: Iterable[str] | None) -> list[str]:
    """Tags, tech stacks, categories...: trimmed, lowercase, without duplicates, order kept."""
    seen: dict[str, None] = {}
    for value in values or []:
        term = unicodedata.normalize("NFC", str(value)).strip().lower()
        if term:
            seen.setdefault(term, None)
    return list(seen)


def normalise_names(values: Iterable[str] | None) -> list[str]:
    """People's names keep their case; only blanks and exact duplicates go. One Unicode form
    (NFC), so "Zoë" typed two ways is one person."""
    seen: dict[str, None] = {}
    for value in values or []:
        name = " ".join(unicodedata.normalize("NFC", str(value)).split())
        if name:
            seen.setdefault(name, None)
    return list(seen)
