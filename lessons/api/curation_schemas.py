"""The curation endpoints' contract: duplicates, merges, "not a duplicate", restoring a version.
(Kept apart from `schemas.py` so the curation console can be read, and merged, on its own.)"""

from ninja import Field, Schema
from pydantic import field_validator

from lessons.api.schemas import BodyId, LessonOut, MemoryOut, StrictIn, TextIn
from lessons.selectors.curation import (
    DEFAULT_DUPLICATE_LIMIT,
    DEFAULT_DUPLICATE_THRESHOLD,
    MAX_DUPLICATE_LIMIT,
    MAX_DUPLICATE_THRESHOLD,
)

MAX_MERGED = 50


class DuplicatesQuery(TextIn):
    threshold: float = Field(
        DEFAULT_DUPLICATE_THRESHOLD,
        gt=0,
        le=MAX_DUPLICATE_THRESHOLD,
        description="Cosine distance under which two rows count as duplicates (0.15 = similarity 0.85).",
    )
    limit: int = Field(DEFAULT_DUPLICATE_LIMIT, ge=1, le=MAX_DUPLICATE_LIMIT, description="How many pairs, closest first.")


class LessonPairOut(Schema):
    first: LessonOut = Field(description="The lesson with the lower id.")
    second: LessonOut
    distance: float = Field(description="Cosine distance of their embeddings.")
    similarity: float = Field(description="1 - distance.")


class LessonDuplicatesOut(Schema):
    threshold: float
    pairs: list[LessonPairOut]


class MemoryPairOut(Schema):
    first: MemoryOut = Field(description="The memory with the lower id.")
    second: MemoryOut
    distance: float
    similarity: float


class MemoryDuplicatesOut(Schema):
    threshold: float
    pairs: list[MemoryPairOut]


class DismissIn(StrictIn):
    ids: list[BodyId] = Field(min_length=2, max_length=2, description="The two ids that are not duplicates.")


class DismissedOut(Schema):
    kind: str
    ids: list[int] = Field(description="The pair, lower id first; it no longer shows among the duplicates.")


class LessonMergeIn(StrictIn):
    merge_ids: list[BodyId] = Field(
        min_length=1, max_length=MAX_MERGED, description="Lessons to merge into this one; they are deleted."
    )
    text_from: BodyId | None = Field(
        None,
        description="The lesson whose title, description, context, recommendation and category are kept: "
        "this lesson (the default) or one of merge_ids.",
    )

    @field_validator("merge_ids")
    @classmethod
    def _distinct(cls, ids: list[int]) -> list[int]:
        if len(set(ids)) != len(ids):
            raise ValueError("name each lesson once")
        return ids


class LessonMergeOut(Schema):
    lesson: LessonOut
    merged_ids: list[int]


class MemoryMergeIn(StrictIn):
    merge_id: BodyId = Field(description="The memory to merge into this one; it is deleted with its versions.")


class MemoryMergeOut(Schema):
    memory: MemoryOut
    merged_id: int
