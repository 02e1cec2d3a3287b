"""Small helpers shared by the write services."""

import unicodedata
from collections.abc import Collection, Iterable
from datetime import datetime

from django.core.exceptions import ValidationError
from django.db.models import Q
from django.utils import timezone

from lessons.models import DuplicateDismissal
from lessons.search.kinds import term_key
from lessons.text import clean_name, clean_text, name_key, name_says_more


def changed_since_opened(*, row, opened_at: datetime | None, would: str, then: str) -> ValidationError | None:
    """The refusal of a write from a page opened before someone else changed `row` (`opened_at`:
    its `updated_at` when the page was drawn; None: not checked), or None when it did not change.
    `would`: what the write would do to that change; `then`: what to do instead."""
    if opened_at is None or row.updated_at == opened_at:
        return None
    changed = timezone.localtime(row.updated_at).strftime("%Y-%m-%d %H:%M:%S")
    return ValidationError(
        f"This {row._meta.verbose_name} was changed by someone else at {changed}, after you opened this page, "
        f"and {would}. {then}",
        code="changed_since_opened",
    )


class ChangedSinceRead(Exception):
    """A write refused because the row changed since the writer read it (over HTTP `If-Match`, in a
    tool `expected_updated_at`): another writer's change would have been lost. Nothing was written."""

    def __init__(self, *, row):
        self.row = row  # as stored, read under the write's row lock
        super().__init__(f"{row._meta.verbose_name} {row.pk} was changed at {row.updated_at.isoformat()}")


def _to_the_millisecond(moment: datetime) -> datetime:
    return moment.replace(microsecond=moment.microsecond // 1000 * 1000)


def refuse_changed_since_read(*, row, expected_updated_at: datetime | Collection[datetime] | None) -> None:
    """Raise ChangedSinceRead unless `row` (read under the caller's row lock) still has the
    `updated_at` the writer read, or one of several (If-Match may list tags); None: not checked.
    Compared to the millisecond: every answer writes `updated_at` so, and a writer sends back what
    it read."""
    if expected_updated_at is None:
        return
    expected = (expected_updated_at,) if isinstance(expected_updated_at, datetime) else expected_updated_at
    stored = _to_the_millisecond(row.updated_at)
    if not any(_to_the_millisecond(moment) == stored for moment in expected):
        raise ChangedSinceRead(row=row)


def normalise_text(value) -> str:
    """A free text (a title, a description, a memory's content) as stored (lessons.text.clean_text):
    one Unicode form (NFC), without invisible characters, trimmed, "" when nothing in it shows."""
    return clean_text(value)


def normalise_terms(values: Iterable[str] | None) -> list[str]:
    """Tags, tech stacks, categories...: trimmed, lowercase, without duplicates, order kept. Two
    spellings of one term (lessons.search.kinds.term_key: "next.js", "nextjs" and "next-js";
    "error handling" and "error-handling") are a duplicate, the first kept: searches and filters
    already read them as one term, so the others only took room in the list's budget. Versions
    stay apart ("java 1.8" and "java 18" are two terms)."""
    seen: dict[str, str] = {}
    for value in values or []:
        term = unicodedata.normalize("NFC", str(value)).strip().lower()
        if term:
            seen.setdefault(term_key(term), term)
    return list(seen.values())


def normalise_names(values: Iterable[str] | None) -> list[str]:
    """People's names keep their case (lessons.text.clean_name); blanks, names without a letter or
    digit, and repeats go: a repeat is the same name in any case, with or without its accents or in
    its compatibility form (lessons.text.name_key: "Smith, John" and "smith, john" are one person,
    "Zoë" and "zoe" too, as the friends listing counts them). The first spelling is kept unless a
    later one says more (name_says_more; before, ["anna", "Anna"] kept "anna" and ["Zoe", "zoë"]
    stored both).
    One Unicode form (NFC), so "Zoë" typed two ways is one spelling."""
    seen: dict[str, str] = {}
    for value in values or []:
        name = clean_name(value)
        if not name:
            continue
        key = name_key(name)
        kept = seen.get(key)
        if kept is None or name_says_more(name) > name_says_more(kept):
            seen[key] = name  # a replaced spelling keeps the place of the first
    return list(seen.values())


def forget_dismissals(*, kind: str, team_id: int, ids: list[int]) -> None:
    """Rows that are deleted take their "not a duplicate" marks with them. A mark names its rows
    by id, without a foreign key (it pairs rows of either table), so a delete left it behind: the
    marks list showed "#12 (deleted)" and the duplicates page counted it."""
    DuplicateDismissal.objects.filter(team_id=team_id, kind=kind).filter(
        Q(low_id__in=ids) | Q(high_id__in=ids)).delete()
