"""Small helpers shared by the write services."""

import unicodedata
from collections.abc import Iterable


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
