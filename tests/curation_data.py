"""Lessons and memories for the curation tests: pairs that say the same thing in other words, and
rows that share nothing with them, embedded with the real model (the distances are the model's)."""

from lessons.models import Lesson, Memory, Team
from lessons.services.embeddings import embedding_refresh
from lessons.services.lessons import lesson_create
from lessons.services.memories import memory_create

DOCKER_PIN = {
    "title": "Pin Docker base image versions",
    "description": "Builds broke when the latest tag of the base image changed under us.",
    "recommendation": "Pin base images to a digest or an exact version tag.",
}
DOCKER_PIN_AGAIN = {
    "title": "Always pin the version of your Docker base images",
    "description": "Our build broke because the base image's latest tag moved.",
    "recommendation": "Pin each base image to an exact version or a digest.",
}
FOREIGN_KEYS = {
    "title": "Index foreign keys in PostgreSQL",
    "description": "Deleting a parent row scanned the whole child table.",
    "recommendation": "Create an index on every foreign key column.",
}
CHECKOUT_TESTS = {
    "title": "Test the checkout flow end to end",
    "description": "A payment form bug reached production because only units were tested.",
    "recommendation": "Run one browser test through checkout on every deploy.",
}

PANIC = "Had a panic attack on the tram on the way to work; my chest was tight and my hands tingled."
PANIC_AGAIN = "Panic attack on the tram to work: tight chest, tingling hands."
BASS = "Tom plays bass in a jazz band on Fridays."


def embed(*rows: Lesson | Memory) -> None:
    """Embed rows with the real model now (the tests' transactions never commit, so the task
    queued after a save does not run)."""
    for model in (Lesson, Memory):
        items = [row for row in rows if isinstance(row, model)]
        if items:
            report = embedding_refresh(items=items)
            assert report.failure_reason is None, report.failure_reason
    for row in rows:
        row.refresh_from_db()


def lesson(team: Team, fields: dict, **extra) -> Lesson:
    return lesson_create(team=team, **{**fields, **extra})


def embedded_lessons(team: Team, *field_sets: dict, **extra) -> list[Lesson]:
    rows = [lesson(team, fields, **extra) for fields in field_sets]
    embed(*rows)
    return rows


def embedded_memories(team: Team, *contents: str) -> list[Memory]:
    rows = [memory_create(team=team, content=content) for content in contents]
    embed(*rows)
    return rows
