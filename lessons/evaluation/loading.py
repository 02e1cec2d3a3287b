"""Loading a BEIR corpus into teams of its own, through the normal services and the normal
embedding pipeline, so that the evaluation measures what users get.

A document becomes
- a lesson: title = the document's title, description = its text;
- a memory: content = the title, details = the text.
A document without a title gives its first sentence as the title (or content) and the rest of its
text as the description (or details), so the embedded text is the document's text, once.
Both ways the embedded text is "title\\ntext", the text BEIR embeds for a document.

Loading is incremental: existing rows are found by external_id (the document's `_id`) in one
query per team; unchanged rows are left alone, changed ones updated, rows of documents no longer
in the corpus deleted. Only rows whose embedding is missing or stale are embedded afterwards, so a
second run over the same corpus and model embeds nothing.
"""

import hashlib
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from django.core.exceptions import ValidationError
from django.db import DataError, transaction
from django.utils.text import slugify

from lessons.embedding import EmbeddingUnavailable
from lessons.error_text import first_line
from lessons.evaluation.beir import DatasetError, Document
from lessons.models import Lesson, Memory, Team
from lessons.services.embeddings import embedding_backfill, embeddings_deferred
from lessons.services.keyword_index import keyword_impacts_refresh_if_drifted
from lessons.services.lessons import lesson_create, lesson_delete, lesson_update
from lessons.services.memories import memory_create, memory_delete, memory_update
from lessons.services.teams import team_get_or_create
from lessons.text import clean_text

TITLE_MAX_CHARS = 300  # Lesson.title's max_length
EMBED_BATCH_SIZE = 64
# Rows written per transaction. Every write updates its team's keyword counters and its terms'
# document frequencies (triggers, migration 0006); inside one transaction each update of a row
# walks the versions the transaction already left of it, so one transaction for a whole corpus
# grew quadratic (SciFact: 5-6 rows/s by the 2,000th row). A commit per row costs more than the row.
LOAD_CHUNK_ROWS = 200

# progress(total=..., desc=...) -> an object with update(n) and close(), like tqdm.
ProgressFactory = Callable[..., object]


@dataclass
class LoadReport:
    created: int = 0
    updated: int = 0
    unchanged: int = 0
    deleted: int = 0
    embedded: int = 0
    embedding_failed: int = 0
    embedding_failure: str | None = None
    impacts_refreshed: int = 0  # keyword postings whose impacts were recomputed after the load

    def add(self, other: "LoadReport") -> None:
        for name in ("created", "updated", "unchanged", "deleted", "embedded", "embedding_failed", "impacts_refreshed"):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.embedding_failure = self.embedding_failure or other.embedding_failure

    def summary(self) -> str:
        text = (
            f"{self.created} created, {self.updated} updated, {self.unchanged} unchanged, "
            f"{self.deleted} deleted, {self.embedded} embedded"
        )
        if self.embedding_failed:
            text += f", {self.embedding_failed} not embedded ({self.embedding_failure})"
        if self.impacts_refreshed:
            text += f", keyword impacts refreshed ({self.impacts_refreshed} postings)"
        return text


class _NoProgress:
    def update(self, n: int = 1) -> None:
        pass

    def close(self) -> None:
        pass


def progress_bar(factory: ProgressFactory | None, *, total: int, desc: str):
    """A bar from `factory`, or one that shows nothing."""
    return factory(total=total, desc=desc) if factory is not None else _NoProgress()


# --- teams -----------------------------------------------------------------------------------


def team_base_slug(*, dataset_name: str) -> str:
    """`eval-<name>`; a name that slugify changes or that is too long gets a short hash of itself,
    since two such names could meet ("日本" and "中文" both slugify to nothing) and mix their
    documents in one team."""
    wanted = f"eval-{dataset_name}"
    slug = slugify(wanted)
    if slug == wanted and len(slug) <= 80:
        return slug
    return f"{slug[:71].rstrip('-') or 'eval'}-{hashlib.sha1(dataset_name.encode()).hexdigest()[:8]}"


def team_name(*, dataset_name: str, scope_key: str | None = None, scope_value: str | None = None) -> str:
    if scope_value is None:
        return f"Evaluation {dataset_name}"
    return f"Evaluation {dataset_name} ({scope_key}={scope_value})"


def team_slugs(*, dataset_name: str, scope_values: Iterable[str | None]) -> dict[str | None, str]:
    """A slug per scope value (None: the documents and queries without the scope key). Values
    that slugify alike (or too long) get a short hash of the value, so each keeps its own team."""
    base = team_base_slug(dataset_name=dataset_name)
    slugs: dict[str | None, str] = {}
    taken = {base}
    for value in sorted({v for v in scope_values if v is not None}):
        slug = slugify(f"{base}-{value}")
        if slug in taken or len(slug) > 100 or slug == base:
            slug = f"{slug[:88]}-{hashlib.sha1(value.encode()).hexdigest()[:8]}"
        taken.add(slug)
        slugs[value] = slug
    slugs[None] = base
    return slugs


def scope_value(metadata: dict, scope_key: str | None) -> str | None:
    if not scope_key or metadata.get(scope_key) in (None, ""):
        return None
    return str(metadata[scope_key])


def evaluation_teams(*, dataset_name: str) -> list[Team]:
    """The dataset's teams from any earlier run: its base team and its per-scope teams."""
    base = team_base_slug(dataset_name=dataset_name)
    scoped_name = f"{team_name(dataset_name=dataset_name)} ("
    return list(
        Team.objects.filter(slug=base)
        | Team.objects.filter(slug__startswith=f"{base}-", name__startswith=scoped_name)
    )


def evaluation_teams_drop(*, dataset_name: str) -> int:
    """Delete the dataset's teams with everything in them; returns how many teams went."""
    teams = evaluation_teams(dataset_name=dataset_name)
    with transaction.atomic():
        for team in teams:
            team.delete()
    return len(teams)


# --- documents -> rows -----------------------------------------------------------------------

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")


def _split_first_sentence(text: str) -> tuple[str, str]:
    text = text.strip()
    parts = _SENTENCE_END.split(text, maxsplit=1)
    first, rest = parts[0], (parts[1] if len(parts) > 1 else "")
    if len(first) > TITLE_MAX_CHARS:
        cut = first.rfind(" ", 0, TITLE_MAX_CHARS)
        cut = cut if cut > 0 else TITLE_MAX_CHARS
        first, rest = first[:cut], (first[cut:] + " " + rest).strip()
    return first, rest


def document_fields(document: Document, *, kind: str) -> dict:
    """The service arguments for a document (see the module docstring), its texts as the services
    store them (lessons.text.clean_text): compared raw with the stored rows, three SciFact abstracts
    holding a zero-width space or a decomposed "Å" were "updated" on every load, to the same text."""
    title, text = clean_text(document.title), clean_text(document.text)
    if not title:
        title, text = _split_first_sentence(text)
    if kind == "lessons":
        return {"external_id": document.id, "title": title[:TITLE_MAX_CHARS], "description": text}
    return {"external_id": document.id, "content": title, "details": text}


def _stored_rows(*, team: Team, kind: str) -> dict[str, Lesson | Memory]:
    """The team's rows by external_id, in one query (embeddings not fetched)."""
    if kind == "lessons":
        rows = Lesson.objects.filter(team=team).defer("embedding")
    else:
        rows = Memory.objects.filter(team=team, current_version__isnull=True).defer("embedding")
    return {row.external_id: row for row in rows.filter(external_id__isnull=False)}


def corpus_load(
    *, team: Team, documents: list[Document], kind: str, progress: ProgressFactory | None = None
) -> LoadReport:
    """Create, update or delete the team's rows so that they match `documents` (services only;
    every row is validated as any other write). Embedding is left to `corpus_embed`."""
    create, update, delete = (
        (lesson_create, lesson_update, lesson_delete)
        if kind == "lessons"
        else (memory_create, memory_update, memory_delete)
    )
    report = LoadReport()
    stored = _stored_rows(team=team, kind=kind)
    wanted = {document.id: document_fields(document, kind=kind) for document in documents}
    pending = [doc_id for doc_id in wanted if doc_id not in stored]
    changed = [
        doc_id
        for doc_id, fields in wanted.items()
        if doc_id in stored and any(getattr(stored[doc_id], name) != value for name, value in fields.items())
    ]
    gone = [row for external_id, row in stored.items() if external_id not in wanted]
    report.unchanged = len(wanted) - len(pending) - len(changed)

    row_arg = "lesson" if kind == "lessons" else "memory"

    def create_one(doc_id) -> str:
        create(team=team, **wanted[doc_id])
        return "created"

    def update_one(doc_id) -> str:
        fields = {name: value for name, value in wanted[doc_id].items() if name != "external_id"}
        update(**{row_arg: stored[doc_id]}, **fields)
        return "updated"

    def delete_one(row) -> str:
        delete(**{row_arg: row})
        return "deleted"

    operations = ([(create_one, doc_id) for doc_id in pending] + [(update_one, doc_id) for doc_id in changed]
                  + [(delete_one, row) for row in gone])
    bar = progress_bar(progress, total=len(operations), desc=f"loading {team.slug}")
    try:
        # Transactions of LOAD_CHUNK_ROWS rows: an interrupted load keeps its finished chunks, and
        # a re-run finds them by external_id. Deferred: the rows are embedded afterwards in batches
        # (corpus_embed), not one task per row.
        with embeddings_deferred():
            for start in range(0, len(operations), LOAD_CHUNK_ROWS):
                with transaction.atomic():
                    for operation, target in operations[start:start + LOAD_CHUNK_ROWS]:
                        outcome = _named_on_failure(operation, target)
                        setattr(report, outcome, getattr(report, outcome) + 1)
                        bar.update(1)
    finally:
        bar.close()
    # As after an import: a load moves the team's average length, so the keyword heads' impacts are
    # recomputed when it drifted (keyword.py; a team loaded before this was checked is caught up too).
    report.impacts_refreshed = sum(keyword_impacts_refresh_if_drifted(team=team, kinds=(kind,)).values())
    return report


def _named_on_failure(operation, target) -> str:
    """Run one load operation; a row the services or the database refuse names its document
    (the chunk it was in rolls back, the chunks before it are kept)."""
    try:
        return operation(target)
    except (ValidationError, DataError) as error:
        name = target if isinstance(target, str) else getattr(target, "external_id", target)
        reason = "; ".join(error.messages) if isinstance(error, ValidationError) else first_line(error)
        raise DatasetError(f"document {name!r} cannot be stored: {reason}") from error


def corpus_embed(*, team: Team, kind: str, progress: ProgressFactory | None = None) -> LoadReport:
    """Embed the team's rows whose embedding is missing or stale (their text or the model
    changed) through the normal batched backfill; fresh rows are not touched."""
    bar = None

    def advance(count: int, total: int) -> None:
        nonlocal bar
        if bar is None:
            bar = progress_bar(progress, total=total, desc=f"embedding {team.slug}")
        bar.update(count)

    try:
        result = embedding_backfill(kind=kind, team=team, batch_size=EMBED_BATCH_SIZE, progress=advance)
        result.stop_if_interrupted()  # measuring a half-embedded corpus would be wrong
    except EmbeddingUnavailable as error:
        # Searches still run (semantic and hybrid degrade); the command says why.
        pending = embedding_backfill(kind=kind, team=team, dry_run=True).pending
        return LoadReport(embedding_failed=pending, embedding_failure=str(error))
    finally:
        if bar is not None:
            bar.close()
    return LoadReport(
        embedded=result.embedded,
        embedding_failed=result.failed,
        embedding_failure="; ".join(result.failure_reasons) or None,
    )


def dataset_load(
    *,
    dataset_name: str,
    documents: list[Document],
    kind: str,
    scope_key: str | None = None,
    extra_scope_values: Iterable[str | None] = (),
    progress: ProgressFactory | None = None,
) -> tuple[dict[str | None, Team], LoadReport]:
    """Load `documents` into the dataset's team(s) and embed what is due. Returns the team of
    each scope value (None: the base team, made only when a document or query lacks the scope
    key, or without one) and what was done."""
    by_scope: dict[str | None, list[Document]] = {}
    for document in documents:
        by_scope.setdefault(scope_value(document.metadata, scope_key), []).append(document)
    wanted = {*by_scope, *extra_scope_values}
    if scope_key is None:
        wanted.add(None)
    slugs = team_slugs(dataset_name=dataset_name, scope_values=wanted)
    teams: dict[str | None, Team] = {}
    report = LoadReport()
    for value, slug in slugs.items():
        if value not in wanted:  # the base slug stays reserved, but an empty base team helps nobody
            continue
        team = team_get_or_create(
            slug=slug, name=team_name(dataset_name=dataset_name, scope_key=scope_key, scope_value=value)
        )
        teams[value] = team
        report.add(corpus_load(team=team, documents=by_scope.get(value, []), kind=kind, progress=progress))
    for team in teams.values():
        report.add(corpus_embed(team=team, kind=kind, progress=progress))
    return teams, report
