"""Writing memories. Changing a memory's text keeps the previous text as a version row of its
own (with the embedding it already had), so a later search can look across versions; the current
row keeps its id, so links to it stay valid."""

from collections.abc import Collection
from datetime import datetime

from django.core.exceptions import ValidationError
from django.db import transaction

from lessons.models import DuplicateKind, Memory, Team
from lessons.services.common import (
    forget_dismissals, normalise_names, normalise_terms, normalise_text, refuse_changed_since_read,
)
from lessons.services.embeddings import embedding_schedule, embedding_schedule_if_pending
from lessons.text import clean_identifier

VERSIONED_FIELDS = ("content", "details")
EDITABLE_FIELDS = (
    "external_id",
    "content",
    "details",
    "categories",
    "importance",
    "people",
    "emotions",
    "occurred_at",
)
# Copied onto a version row when the text changes: the memory as it stood.
SNAPSHOT_FIELDS = (
    "team_id",
    "external_id",
    *EDITABLE_FIELDS[1:],
    "version",
    "embedding",
    "embedding_model",
    "content_hash",
    "embedded_at",
)


def memory_changed_fields(*, memory: Memory, **fields) -> list[str]:
    """The names in `fields` whose values, stored as memory_update stores them, differ from `memory`'s."""
    return [name for name, value in _normalised(fields).items() if getattr(memory, name) != value]


def _normalised(fields: dict) -> dict:
    clean = dict(fields)
    for name in VERSIONED_FIELDS:
        if name in clean and clean[name] is not None:
            clean[name] = normalise_text(clean[name])
    for name in ("categories", "emotions"):
        if name in clean:
            clean[name] = normalise_terms(clean[name])
    if "people" in clean:
        clean["people"] = normalise_names(clean["people"])
    if "external_id" in clean:
        clean["external_id"] = clean_identifier(clean["external_id"]) if clean["external_id"] else None
    return clean


@transaction.atomic
def memory_create(
    *,
    team: Team,
    content: str,
    details: str = "",
    categories: list[str] | None = None,
    importance: int = 5,
    people: list[str] | None = None,
    emotions: list[str] | None = None,
    occurred_at: datetime | None = None,
    external_id: str | None = None,
) -> Memory:
    fields = _normalised(
        {
            "external_id": external_id,
            "content": content,
            "details": details,
            "categories": categories or [],
            "importance": importance,
            "people": people or [],
            "emotions": emotions or [],
            "occurred_at": occurred_at,
        }
    )
    memory = Memory(team=team, **fields)
    memory.full_clean()
    memory.save()
    embedding_schedule(item=memory)
    return memory


@transaction.atomic
def memory_update(
    *, memory: Memory, expected_updated_at: datetime | Collection[datetime] | None = None, **changes
) -> Memory:
    """Apply `changes` (any of EDITABLE_FIELDS). A change of content or details archives the
    previous text as version `n` and makes the memory version `n + 1`.

    Only the fields in `changes` are written, over the row as it is in the database (read under a
    row lock), never over `memory` as the caller read it: two agents editing the importance and
    the text of one memory at once both land (a stale copy used to write the old text back), and
    the admin, whose form has already written the new values onto `memory`, versions correctly.
    With `expected_updated_at` (the `updated_at` the writer read), a memory changed since is refused
    under that lock (ChangedSinceRead): two agents adding a person each no longer lose one of them."""
    unknown = set(changes) - set(EDITABLE_FIELDS)
    if unknown:
        raise TypeError(f"memory_update() got unknown fields: {', '.join(sorted(unknown))}")
    if not memory.is_current:
        raise ValidationError("An earlier version of a memory cannot be edited; edit the current memory.")

    stored = Memory.objects.select_for_update().filter(pk=memory.pk).first()
    if stored is None:  # merged or deleted while the caller held it: said as a lesson's is
        raise Memory.DoesNotExist(f"memory {memory.pk} does not exist (deleted or merged meanwhile)")
    refuse_changed_since_read(row=stored, expected_updated_at=expected_updated_at)
    wanted = {name: getattr(stored, name) for name in EDITABLE_FIELDS}
    wanted.update(_normalised(changes))
    changed = [name for name in EDITABLE_FIELDS if getattr(stored, name) != wanted[name]]
    if not changed:
        return stored

    text_changed = any(name in VERSIONED_FIELDS for name in changed)
    previous_state = _snapshot(stored) if text_changed else None
    for name in changed:
        setattr(stored, name, wanted[name])
    stored.term_fields_changed = tuple(changed)
    stored.full_clean()

    update_fields = [*changed, "updated_at"]
    if previous_state is not None:
        stored.version += 1
        update_fields.append("version")
    stored.save(update_fields=update_fields)
    if previous_state is not None:  # after the save: the version is dated at the memory's new updated_at
        _archive_version(memory=stored, previous_state=previous_state)
    if text_changed:
        embedding_schedule(item=stored)
    memory.__dict__.update({name: getattr(stored, name) for name in [*EDITABLE_FIELDS, "version", "updated_at"]})
    return stored


def _snapshot(memory: Memory) -> dict:
    return {name: getattr(memory, name) for name in SNAPSHOT_FIELDS}


def _archive_version(*, memory: Memory, previous_state: dict) -> Memory:
    """Store the memory's previous state as a version row of its own: `created_at` when its text
    was written, `updated_at` when it was replaced: the memory's updated_at, saved by the edit that
    replaced it (its ETag's moment; the version row's own save came a few milliseconds apart, and
    one edit named three moments in the history and the tag)."""
    # Its text became current when the version before it was replaced, else when the memory was
    # created; the memory's own updated_at may be a later edit of its people or importance.
    replaced_before = memory.previous_versions.order_by("-version").values_list("updated_at", flat=True).first()
    version = Memory(current_version=memory, **previous_state)
    version.save()
    Memory.objects.filter(pk=version.pk).update(created_at=replaced_before or memory.created_at,
                                                updated_at=memory.updated_at)
    # It keeps the embedding copied from the memory; only one never embedded (or stale) needs one.
    embedding_schedule_if_pending(item=version)
    return version


@transaction.atomic
def memory_delete(*, memory: Memory, expected_updated_at: datetime | Collection[datetime] | None = None) -> None:
    """Delete a memory with all its versions. The row is locked first, as an edit locks it: an edit
    under way lands before, and the version it adds goes too (collected before that version
    existed, the delete failed on it with a foreign-key error and left the memory in place). With
    `expected_updated_at`, a memory changed since is not deleted (ChangedSinceRead)."""
    stored = Memory.objects.select_for_update().filter(pk=memory.pk).first()
    if stored is None:
        raise Memory.DoesNotExist(f"memory {memory.pk} does not exist (deleted or merged meanwhile)")
    refuse_changed_since_read(row=stored, expected_updated_at=expected_updated_at)
    stored.delete()
    forget_dismissals(kind=DuplicateKind.MEMORY, team_id=stored.team_id, ids=[memory.pk])


@transaction.atomic
def memory_delete_many(*, memories) -> int:
    """Delete `memories` (a queryset or list) through `memory_delete`, all or none; a version whose
    memory was deleted earlier in the loop is already gone with it."""
    count = 0
    for memory in list(memories):
        if Memory.objects.filter(pk=memory.pk).exists():
            memory_delete(memory=memory)
            count += 1
    return count
