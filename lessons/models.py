"""The data model: teams (tenants), lessons learned, and personal memories with their versions.

Lessons and memories both carry the same embedding columns (see `EmbeddedMixin`) and a stored,
weighted full-text search vector that PostgreSQL keeps current (`GeneratedField`), so neither
the keyword nor the semantic index needs an update command.
"""

import re
import uuid
from datetime import UTC, datetime

from django.contrib.postgres.fields import ArrayField
from django.contrib.postgres.functions import RandomUUID
from django.contrib.postgres.indexes import GinIndex
from django.contrib.postgres.search import SearchVector, SearchVectorField
from django.core.exceptions import ValidationError
from django.core.validators import MaxLengthValidator, MaxValueValidator, MinValueValidator, RegexValidator
from django.db import models
from django.db.models import F, Func, Q
from django.db.models.functions import Coalesce
from django.utils.text import Truncator
from pgvector.django import HnswIndex, VectorField

EMBEDDING_DIMENSIONS = 384
# A lesson's frequency is a PostgreSQL integer; sums (merges, same-title rows in a search) stop here.
MAX_FREQUENCY = 2**31 - 1
SHORT_TERM_LENGTH = 64
# A text field's most characters (a lesson's description, context, recommendation; a memory's
# content and details), checked by every writer: the API's schemas, and the services' full_clean
# for the imports and the admin (an import once stored a 50-million-character description).
MAX_TEXT_CHARS = 20_000
long_text_validator = MaxLengthValidator(MAX_TEXT_CHARS)
# The columns search filters read (lessons/search/filters.py), carried by each kind's covering
# index: the BM25 leg checks the filter row by row as it walks its heads, and at 300,000 lessons
# fetching each row from the table instead took a filtered search's p95 from 80.6 to 100.5 ms.
# A person search's text match (content, details) is the one filter not covered.
LESSON_FILTER_COLUMNS = ["team", "status", "category", "tech_stacks", "project_types", "tags", "updated_at"]
MEMORY_FILTER_COLUMNS = ["team", "current_version", "categories", "importance", "people", "emotions", "occurred_at",
                         "created_at"]
# When a memory happened: occurred_at, else when it was stored. The timeline's order, the lists'
# since/until and a search's filters read it; an index holds it (memory_current_timeline), so a
# query must spell it this way to be served by that index.
MEMORY_HAPPENED_AT = Coalesce("occurred_at", "created_at")
CURRENT_MEMORY = Q(current_version__isnull=True)  # the memory as it stands, not an earlier version
# A btree entry holds at most 2,704 bytes, so the term lists those indexes carry have a budget: 50
# tags of 64 characters (what the API allowed) failed the INSERT ("index row size 3504 exceeds
# btree version 4 maximum 2704"), answered as an outage, and stopped an import halfway. Each term
# also takes a header and padding (up to 7 bytes), the other columns about 100: 100 terms of
# 1,500 bytes together stay under 2,200 whatever their lengths.
MAX_TERMS_PER_FIELD = 50
MAX_TERMS_PER_ROW = 100
MAX_TERM_BYTES_PER_ROW = 1_500

# Case is accepted here because the services lowercase these terms before saving. ASCII: without
# it IGNORECASE lets [a-z] match letters that only fold to ASCII ("ſ", the Kelvin sign).
# A dot may lead: ".net" is how .NET is written (it was refused, and "net" or "dotnet" are not its name).
short_term_validator = RegexValidator(
    r"^\.?[a-z0-9][a-z0-9+#._ -]*$",
    "Use ASCII letters, digits, spaces and + # . _ - (start with a letter or digit, or a dot and one: .net).",
    flags=re.IGNORECASE | re.ASCII,
)


def validate_storable_moment(value: datetime | None) -> None:
    """PostgreSQL stores a timestamp in UTC, years 1..9999 as Python reads them back: a moment
    valid as written ("9999-12-31T23:00:00-02:00") but past that range in UTC would be stored and
    then break every read of its row."""
    if value is None or value.tzinfo is None:
        return
    try:
        value.astimezone(UTC)
    except OverflowError:
        raise ValidationError("Use a moment between years 1 and 9999 in UTC.", code="out_of_range") from None


class UniqueExternalIdMixin:
    """A taken `external_id` is an error naming the field (the unique constraint's own message
    named no field, or only the constraint). Checked once, in clean(); validate_constraints skips
    the constraint, which would run the same query again. The constraint itself still guards the
    database against two writers racing."""

    def external_id_peers(self) -> models.QuerySet | None:
        """The rows whose external_id this one must not share (None: no check)."""
        raise NotImplementedError

    def clean(self):
        super().clean()
        peers = self.external_id_peers()
        if not self.external_id or peers is None:
            return
        if peers.filter(team_id=self.team_id, external_id=self.external_id).exclude(pk=self.pk).exists():
            noun = self._meta.verbose_name
            raise ValidationError(
                {"external_id": f"another {noun} of this team already has external_id {self.external_id!r}."},
                code="taken",
            )

    def validate_constraints(self, exclude=None):
        super().validate_constraints(exclude={*(exclude or ()), "external_id"})


class ArrayAsText(Func):
    """`lessons_array_as_text(array)`: an IMMUTABLE array_to_string, created by migration 0001.

    PostgreSQL marks array_to_string STABLE, and a generated column may only use immutable
    functions, so tags and tech stacks reach the search vector through this wrapper.
    """

    function = "lessons_array_as_text"
    output_field = models.TextField()


class WithoutTagStarts(Func):
    """`translate(text, '<', ' ')`: the text as the keyword index reads it.

    PostgreSQL's text parser takes `<script>` and `<style>` for HTML and drops every word after
    them up to a closing tag that lessons about web pages seldom have ("Load <script> tags with
    defer" was indexed as "load" alone); other tags vanish as words ("<iframe>"). Without its
    `<` a tag is a plain word. The query's words go through the same translate
    (lessons/search/keyword.py). IMMUTABLE, so a generated column may use it.
    """

    function = "translate"
    template = "%(function)s(%(expressions)s, '<', ' ')"
    output_field = models.TextField()


class KeywordText(Func):
    """`lessons_keyword_text(text)`: a text as the keyword index reads it (migration 0028), IMMUTABLE
    so that a generated column may use it:

    - in its Unicode compatibility form (NFKC, migration 0030): full-width Latin ("ＲＥＡＣＴ", as
      Chinese and Japanese keyboards type it) is `react`, half-width Katakana ("ｺｰﾋｰ") the full-width
      "コーヒー", a ligature ("ﬁle") its letters; each was a lexeme no other spelling found.
    - without its accents, as PostgreSQL's unaccent() folds them ("Café" is `cafe`, "Søren"
      `soren`, "straße" `strasse`); the query is folded the same way (lessons/search/keyword.py).
      "cafe" found no row saying "Café", and "Zoe" none saying "Zoë", although the person search
      already folded both sides.
    - each Han, Hiragana and Katakana character a word of its own: those scripts are written
      without spaces, and the text parser took a whole run ("我喜欢咖啡") for one word, so a
      query for "咖啡" matched nothing. As characters, BM25 ranks the rows that carry more of the
      query's characters, rarer ones weighing more (the model, English-only, cannot help there).
    """

    function = "lessons_keyword_text"
    output_field = models.TextField()


def short_terms_field(**kwargs):
    return ArrayField(
        models.CharField(max_length=SHORT_TERM_LENGTH, validators=[short_term_validator]),
        default=list,
        blank=True,
        **kwargs,
    )


# `--team Acme` and `--team acme` would otherwise name two teams; slugify() (evaluation teams,
# the admin's suggestion from the name) only ever makes lowercase ones.
lowercase_slug = RegexValidator(r"^[^A-Z]*\Z", "Use lowercase letters (acme, not Acme): a team is named in lowercase.")


class Team(models.Model):
    slug = models.SlugField(max_length=100, unique=True, validators=[lowercase_slug])
    name = models.CharField(max_length=200)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["slug"]

    def __str__(self):
        return self.name or self.slug

    def clean_fields(self, exclude=None):
        # A team created before slugs were lowercase (migration 0014) keeps its slug: its form
        # saves while the slug is unchanged; a new or changed slug must be lowercase.
        if self.pk and Team.objects.filter(pk=self.pk, slug=self.slug).exists():
            exclude = {*(exclude or ()), "slug"}
        super().clean_fields(exclude=exclude)

    def clean(self):
        # "acme" beside an old "Acme" would be two teams that every lookup tells apart by case alone
        twin = Team.objects.filter(slug__iexact=self.slug).exclude(pk=self.pk).values_list("slug", flat=True).first()
        if twin is not None and twin != self.slug:
            # renaming the other team helps only when its own slug has capitals (made before 0014)
            rename = "" if twin == twin.lower() else (
                f", or give that team the slug {twin.lower()!r} (the admin's team page)")
            raise ValidationError({"slug": f"team {twin!r} has this slug in other capitals; use {twin!r}{rename}"})


class TermBudgetMixin:
    """Checks a row's term lists (`term_fields`) against the budget above, in clean(), so every
    writer (API, MCP, imports, admin, merges) refuses an oversized row by the field's name."""

    term_fields: tuple[str, ...] = ()
    # The fields an edit changes (set by the update services before full_clean): a row over the budget
    # names the largest of those, so a PATCH of tech_stacks alone is not refused naming the stored tags.
    # Unset (a create, an import, the admin): the largest of all.
    term_fields_changed: tuple[str, ...] = ()

    def clean(self):
        super().clean()
        lists = {name: [str(term) for term in getattr(self, name) or []] for name in self.term_fields}
        too_many = {name: f"at most {MAX_TERMS_PER_FIELD} entries; got {len(terms)}"
                    for name, terms in lists.items() if len(terms) > MAX_TERMS_PER_FIELD}
        if too_many:
            raise ValidationError(too_many)
        sizes = {name: sum(len(term.encode()) for term in terms) for name, terms in lists.items()}
        count, size = sum(len(terms) for terms in lists.values()), sum(sizes.values())
        if count > MAX_TERMS_PER_ROW or size > MAX_TERM_BYTES_PER_ROW:
            names = [name.replace("_", " ") for name in self.term_fields]
            together = f"{', '.join(names[:-1])} and {names[-1]}"
            named = [name for name in self.term_fields_changed if name in sizes] or list(sizes)
            raise ValidationError({max(named, key=sizes.get): (
                f"{together} hold at most {MAX_TERMS_PER_ROW} entries and {MAX_TERM_BYTES_PER_ROW:,} bytes of "
                f"text (UTF-8) together; this {self._meta.verbose_name} has {count} and {size:,}"
            )})


class EmbeddingStatus(models.TextChoices):
    FRESH = "fresh", "Fresh"
    STALE = "stale", "Stale"
    MISSING = "missing", "Missing"


class EmbeddedMixin(models.Model):
    """Embedding columns shared by lessons and memories.

    `content_hash` is the SHA-256 of the model name and the embedded text at the time of
    embedding: a row is stale when its current text (or the configured model) hashes differently.
    """

    embedding = VectorField(dimensions=EMBEDDING_DIMENSIONS, null=True, blank=True, editable=False)
    embedding_model = models.CharField(max_length=200, blank=True, default="", editable=False)
    content_hash = models.CharField(max_length=64, blank=True, default="", editable=False)
    embedded_at = models.DateTimeField(null=True, blank=True, editable=False)

    class Meta:
        abstract = True


class UsageMixin(models.Model):
    """How often search returned a row and agents reported using it (issue 14).

    Written only by `lessons.services.usage` with single-statement increments (never by `save()`),
    so a concurrent edit of the row cannot lose a count, and `updated_at` does not move.
    """

    returned_count = models.PositiveBigIntegerField(default=0, editable=False, help_text="Times a search returned it.")
    used_count = models.PositiveBigIntegerField(default=0, editable=False, help_text="Times an agent reported using it.")
    not_helpful_count = models.PositiveBigIntegerField(
        default=0, editable=False, help_text="Times an agent reported it as not helpful."
    )
    last_returned_at = models.DateTimeField(null=True, blank=True, editable=False)
    last_used_at = models.DateTimeField(null=True, blank=True, editable=False)

    class Meta:
        abstract = True


class LessonCategory(models.TextChoices):
    """The categories the product knows; the field accepts others (it is extensible)."""

    ARCHITECTURE = "architecture"
    SECURITY = "security"
    DATABASE = "database"
    FRONTEND = "frontend"
    BACKEND = "backend"
    TESTING = "testing"
    DEPLOYMENT = "deployment"
    PERFORMANCE = "performance"
    WORKFLOW = "workflow"


class LessonStatus(models.TextChoices):
    PROPOSED = "proposed"
    CONFIRMED = "confirmed"
    REJECTED = "rejected"


class Lesson(TermBudgetMixin, UniqueExternalIdMixin, UsageMixin, EmbeddedMixin):
    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="lessons")
    external_id = models.CharField(max_length=200, null=True, blank=True)
    # Who the row is across an export and an import (lessons.selectors.exports): a backup restored
    # over the team it came from finds each row by it, text edited since or not (a row without an
    # external_id used to be matched on its text alone, and one edited since came back twice).
    uid = models.UUIDField(default=uuid.uuid4, db_default=RandomUUID(), editable=False)
    title = models.CharField(max_length=300)
    description = models.TextField(blank=True, default="", validators=[long_text_validator])
    context = models.TextField(blank=True, default="", validators=[long_text_validator])
    recommendation = models.TextField(blank=True, default="", validators=[long_text_validator])
    category = models.CharField(
        max_length=SHORT_TERM_LENGTH,
        default=LessonCategory.WORKFLOW,
        validators=[short_term_validator],
        help_text="One of " + ", ".join(LessonCategory.values) + ", or a new lowercase category.",
    )
    confidence = models.FloatField(default=0.5, validators=[MinValueValidator(0.0), MaxValueValidator(1.0)])
    frequency = models.PositiveIntegerField(
        default=1, validators=[MinValueValidator(1), MaxValueValidator(MAX_FREQUENCY)]
    )
    project_types = short_terms_field()
    tech_stacks = short_terms_field()
    tags = short_terms_field()
    status = models.CharField(max_length=20, choices=LessonStatus.choices, default=LessonStatus.CONFIRMED)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    # A digest of what an import last wrote, read back from the row (lessons.services.imports): a
    # re-import leaves a lesson curators changed since (an edit, a merge) as they left it.
    imported_digest = models.CharField(max_length=64, blank=True, default="", editable=False)

    # Title and exact terms weigh most; tags, tech stacks and category are indexed unstemmed
    # ('simple') so that `nextjs` or `rls` match exactly. Every text is read without its accents.
    search_vector = models.GeneratedField(
        expression=(
            SearchVector(KeywordText(WithoutTagStarts("title")), weight="A", config="english")
            + SearchVector(KeywordText(ArrayAsText("tags")), weight="A", config="simple")
            + SearchVector(KeywordText(ArrayAsText("tech_stacks")), weight="A", config="simple")
            + SearchVector(KeywordText("category"), weight="A", config="simple")
            + SearchVector(KeywordText(WithoutTagStarts("description")), weight="B", config="english")
            + SearchVector(KeywordText(WithoutTagStarts("recommendation")), weight="B", config="english")
            + SearchVector(KeywordText(WithoutTagStarts("context")), weight="C", config="english")
            + SearchVector(KeywordText(ArrayAsText("project_types")), weight="C", config="simple")
        ),
        output_field=SearchVectorField(),
        db_persist=True,
    )

    class Meta:
        ordering = ["-updated_at", "-id"]
        constraints = [
            models.UniqueConstraint(fields=["team", "external_id"], name="lesson_external_id_unique_per_team"),
            models.UniqueConstraint(fields=["team", "uid"], name="lesson_uid_unique_per_team"),
            models.CheckConstraint(
                condition=Q(confidence__gte=0.0) & Q(confidence__lte=1.0), name="lesson_confidence_0_to_1"
            ),
            models.CheckConstraint(condition=Q(frequency__gte=1), name="lesson_frequency_at_least_1"),
            models.CheckConstraint(condition=Q(status__in=LessonStatus.values), name="lesson_status_known"),
            models.CheckConstraint(condition=~Q(title=""), name="lesson_title_not_empty"),
        ]
        indexes = [
            models.Index(fields=["team", "status", "category"], name="lesson_team_status_category"),
            models.Index(fields=["id"], include=LESSON_FILTER_COLUMNS, name="lesson_filter_columns"),
            models.Index(fields=["team", "-updated_at"], name="lesson_team_recent"),
            GinIndex(fields=["search_vector"], name="lesson_search_vector_gin"),
            GinIndex(fields=["tech_stacks"], name="lesson_tech_stacks_gin"),
            GinIndex(fields=["project_types"], name="lesson_project_types_gin"),
            GinIndex(fields=["tags"], name="lesson_tags_gin"),
            HnswIndex(
                name="lesson_embedding_hnsw",
                fields=["embedding"],
                m=16,
                ef_construction=64,
                opclasses=["vector_cosine_ops"],
            ),
        ]

    term_fields = ("tags", "tech_stacks", "project_types")

    def external_id_peers(self):
        return Lesson.objects.all()

    def __str__(self):
        return self.title


class Memory(TermBudgetMixin, UniqueExternalIdMixin, UsageMixin, EmbeddedMixin):
    """A personal memory. The row with `current_version` NULL is the memory as it stands now; each
    earlier text is kept as a row of its own pointing at it (with its own embedding), so that a
    search can look across versions."""

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="memories")
    external_id = models.CharField(max_length=200, null=True, blank=True)
    # Who the row is across an export and an import (lessons.selectors.exports): a backup restored
    # over the team it came from finds each row by it, text edited since or not (a row without an
    # external_id used to be matched on its text alone, and one edited since came back twice).
    uid = models.UUIDField(default=uuid.uuid4, db_default=RandomUUID(), editable=False)
    content = models.TextField(help_text="The short form.", validators=[long_text_validator])
    details = models.TextField(blank=True, default="", help_text="The full form.", validators=[long_text_validator])
    categories = short_terms_field(help_text="person, emotion, interest, event, ... (extensible)")
    importance = models.PositiveSmallIntegerField(
        default=5, validators=[MinValueValidator(1), MaxValueValidator(10)]
    )
    people = ArrayField(models.CharField(max_length=200), default=list, blank=True)
    emotions = short_terms_field()
    occurred_at = models.DateTimeField(null=True, blank=True, validators=[validate_storable_moment])
    version = models.PositiveIntegerField(default=1, editable=False)
    current_version = models.ForeignKey(
        "self",
        on_delete=models.CASCADE,
        null=True,
        blank=True,
        editable=False,
        related_name="previous_versions",
        help_text="Set on an earlier version: the memory it was superseded by.",
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    search_vector = models.GeneratedField(
        expression=(
            SearchVector(KeywordText(WithoutTagStarts("content")), weight="A", config="english")
            + SearchVector(KeywordText(WithoutTagStarts(ArrayAsText("people"))), weight="A", config="simple")
            + SearchVector(KeywordText(ArrayAsText("categories")), weight="A", config="simple")
            + SearchVector(KeywordText(ArrayAsText("emotions")), weight="A", config="simple")
            + SearchVector(KeywordText(WithoutTagStarts("details")), weight="B", config="english")
        ),
        output_field=SearchVectorField(),
        db_persist=True,
    )

    class Meta:
        ordering = ["-updated_at", "-id"]
        verbose_name_plural = "memories"
        constraints = [
            models.UniqueConstraint(
                fields=["team", "external_id"],
                condition=Q(current_version__isnull=True),
                name="memory_external_id_unique_per_team",
            ),
            # A version is a row of its own with a uid of its own; only current memories are restored.
            models.UniqueConstraint(fields=["team", "uid"], condition=Q(current_version__isnull=True),
                                    name="memory_uid_unique_per_team"),
            models.CheckConstraint(
                condition=Q(importance__gte=1) & Q(importance__lte=10), name="memory_importance_1_to_10"
            ),
            models.CheckConstraint(condition=Q(version__gte=1), name="memory_version_at_least_1"),
            models.CheckConstraint(condition=~Q(content=""), name="memory_content_not_empty"),
        ]
        indexes = [
            # The lists' orders, over current memories only: `current_version IS NULL` is no equality,
            # so an index with current_version as a column could not give the rows in order (a
            # page of a 100,000-memory team sorted them all: 45-53 ms, now 1.6-1.9).
            models.Index(F("team"), F("updated_at").desc(), F("id").desc(), condition=CURRENT_MEMORY,
                         name="memory_current_recent"),
            models.Index(F("team"), MEMORY_HAPPENED_AT, F("id"), condition=CURRENT_MEMORY,
                         name="memory_current_timeline"),
            models.Index(F("team"), F("importance").desc(), F("updated_at").desc(), F("id").desc(),
                         condition=CURRENT_MEMORY, name="memory_current_importance"),
            models.Index(fields=["id"], include=MEMORY_FILTER_COLUMNS, name="memory_filter_columns"),
            GinIndex(fields=["search_vector"], name="memory_search_vector_gin"),
            GinIndex(fields=["categories"], name="memory_categories_gin"),
            GinIndex(fields=["emotions"], name="memory_emotions_gin"),
            GinIndex(fields=["people"], name="memory_people_gin"),
            HnswIndex(
                name="memory_embedding_hnsw",
                fields=["embedding"],
                m=16,
                ef_construction=64,
                opclasses=["vector_cosine_ops"],
            ),
        ]

    term_fields = ("people", "categories", "emotions")

    def external_id_peers(self):
        # Earlier versions keep the external_id they had; only current memories must differ.
        return Memory.objects.filter(current_version__isnull=True) if self.current_version_id is None else None

    def __str__(self):
        return Truncator(self.content).chars(80)  # cut at 80 characters with an ellipsis

    @property
    def is_current(self) -> bool:
        return self.current_version_id is None


class SearchRecord(models.Model):
    """One search-shaped answer an agent received, so it can report which results it used
    (`POST /feedback`). Kept `SEARCH_RECORD_RETENTION_DAYS` days (`manage.py purge_searches`);
    the counts on the rows outlive it."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="search_records")
    kind = models.CharField(max_length=20)  # "lessons" | "memories"
    operation = models.CharField(max_length=64, help_text="search, or the shortcut that answered.")
    query = models.TextField(blank=True, default="", help_text="The query, or the shortcut's arguments.")
    mode = models.CharField(max_length=20)
    source = models.CharField(max_length=20, help_text="api, mcp, cli or simulation.")
    result_ids = ArrayField(models.BigIntegerField(), default=list, blank=True, help_text="In the order returned.")
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)

    class Meta:
        ordering = ["-created_at"]
        indexes = [models.Index(fields=["team", "-created_at"], name="search_record_team_recent")]

    def __str__(self):
        return f"{self.operation} {self.query[:60]!r} ({self.created_at:%Y-%m-%d %H:%M})"


class FeedbackVerdict(models.TextChoices):
    USED = "used"
    NOT_HELPFUL = "not_helpful"


class SearchFeedback(models.Model):
    """An agent's verdict on one result of one search; one per (search, result): the first stands."""

    search = models.ForeignKey(SearchRecord, on_delete=models.CASCADE, related_name="feedback")
    result_id = models.BigIntegerField()
    verdict = models.CharField(max_length=20, choices=FeedbackVerdict.choices)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["search", "created_at"]
        verbose_name_plural = "search feedback"
        constraints = [
            models.UniqueConstraint(fields=["search", "result_id"], name="search_feedback_once_per_result"),
            models.CheckConstraint(condition=Q(verdict__in=FeedbackVerdict.values), name="search_feedback_verdict_known"),
        ]

    def __str__(self):
        return f"{self.result_id}: {self.verdict}"


class ApiKey(models.Model):
    """A team's key for the JSON API and the MCP server. Only the SHA-256 of the key is stored;
    `prefix` (the key's first characters) lets people tell keys apart in the admin and logs."""

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="api_keys")
    name = models.CharField(max_length=200, help_text="Who or what uses this key, e.g. 'coding assistant'.")
    prefix = models.CharField(max_length=16, editable=False)
    key_hash = models.CharField(max_length=64, unique=True, editable=False)
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True, editable=False)
    revoked_at = models.DateTimeField(null=True, blank=True, editable=False)

    class Meta:
        ordering = ["team", "name", "-created_at"]
        verbose_name = "API key"
        constraints = [models.CheckConstraint(condition=~Q(name=""), name="api_key_name_not_empty")]
        # every API request looks its key up by prefix among the active ones
        indexes = [models.Index(fields=["prefix"], condition=Q(revoked_at__isnull=True), name="api_key_active_prefix")]

    def __str__(self):
        return f"{self.name} ({self.prefix}…)"

    @property
    def is_active(self) -> bool:
        return self.revoked_at is None


class LessonMerge(models.Model):
    """A lesson that was merged into another one and deleted: what it said, so the merge can be
    read (and undone by hand) later. When a lesson that absorbed others is itself merged, its
    records move to the lesson that absorbs it."""

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="lesson_merges")
    lesson = models.ForeignKey(Lesson, on_delete=models.CASCADE, related_name="merges")
    merged_lesson_id = models.BigIntegerField(help_text="The id the merged lesson had.")
    merged_title = models.CharField(max_length=300)
    merged_fields = models.JSONField(default=dict, help_text="The merged lesson's fields as they were.")
    text_kept = models.BooleanField(
        default=False, help_text="The kept lesson took its text (title, description, context, recommendation) from this one."
    )
    merged_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-merged_at", "-id"]
        constraints = [
            models.UniqueConstraint(fields=["merged_lesson_id"], name="lesson_merge_once"),
        ]
        indexes = [models.Index(fields=["lesson", "-merged_at"], name="lesson_merge_by_lesson")]

    def __str__(self):
        return f"{self.merged_title} (#{self.merged_lesson_id}) -> #{self.lesson_id}"


class MemoryMerge(models.Model):
    """A memory that was merged into another one and deleted with its versions: what it said (its
    fields and its earlier texts), so the merge can be read later and an import of the same
    memory does not bring it back. When a memory that absorbed others is itself merged, its
    records move to the memory that absorbs it."""

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="memory_merges")
    memory = models.ForeignKey(Memory, on_delete=models.CASCADE, related_name="merges")
    merged_memory_id = models.BigIntegerField(help_text="The id the merged memory had.")
    merged_content = models.TextField()
    merged_fields = models.JSONField(
        default=dict, help_text="The merged memory's fields as they were, and its earlier versions' texts."
    )
    merged_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-merged_at", "-id"]
        constraints = [
            models.UniqueConstraint(fields=["merged_memory_id"], name="memory_merge_once"),
        ]
        indexes = [models.Index(fields=["memory", "-merged_at"], name="memory_merge_by_memory")]

    def __str__(self):
        return f"{self.merged_content[:60]} (#{self.merged_memory_id}) -> #{self.memory_id}"


class DuplicateKind(models.TextChoices):
    LESSON = "lesson"
    MEMORY = "memory"


class DuplicateDismissal(models.Model):
    """A curator said two rows are not duplicates: the pair stops showing among the duplicates.
    The ids are stored ordered (`low_id < high_id`), so (a, b) and (b, a) are the same pair."""

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="duplicate_dismissals")
    kind = models.CharField(max_length=10, choices=DuplicateKind.choices)
    low_id = models.BigIntegerField()
    high_id = models.BigIntegerField()
    dismissed_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-dismissed_at", "-id"]
        verbose_name = "not-a-duplicate mark"
        constraints = [
            models.UniqueConstraint(fields=["team", "kind", "low_id", "high_id"], name="duplicate_dismissal_once"),
            models.CheckConstraint(condition=Q(low_id__lt=models.F("high_id")), name="duplicate_dismissal_ordered"),
            models.CheckConstraint(condition=Q(kind__in=DuplicateKind.values), name="duplicate_dismissal_kind_known"),
        ]

    def __str__(self):
        return f"{self.kind} {self.low_id} / {self.high_id} are not duplicates"
