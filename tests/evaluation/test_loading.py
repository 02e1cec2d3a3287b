"""Loading a BEIR corpus into its own team(s) through the services, with the real model."""

from pathlib import Path

import numpy as np
import pytest

from lessons.embedding import content_hash, embedding_text, get_embedding_backend
from lessons.evaluation.beir import Document, read_dataset
from lessons.evaluation.loading import (
    corpus_embed,
    corpus_load,
    dataset_load,
    document_fields,
    evaluation_teams_drop,
    team_slugs,
)
from lessons.models import Lesson, Memory, Team
from tests.factories import LessonFactory, TeamFactory

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"


@pytest.fixture
def tiny():
    return read_dataset(FIXTURES / "beir_tiny", split="test")


@pytest.fixture
def scoped():
    return read_dataset(FIXTURES / "beir_scoped", split="test")


def test_document_fields_for_both_kinds():
    document = Document(id="7", title="A title", text="First sentence. Second one.")
    assert document_fields(document, kind="lessons") == {
        "external_id": "7",
        "title": "A title",
        "description": "First sentence. Second one.",
    }
    assert document_fields(document, kind="memories") == {
        "external_id": "7",
        "content": "A title",
        "details": "First sentence. Second one.",
    }


def test_untitled_document_gives_its_first_sentence_once():
    document = Document(id="1", title="  ", text="My cat is Tom. He sleeps a lot!  And snores.")
    assert document_fields(document, kind="memories") == {
        "external_id": "1",
        "content": "My cat is Tom.",
        "details": "He sleeps a lot!  And snores.",
    }
    long_sentence = "word " * 100  # 500 characters, no full stop: cut at a space before 300
    fields = document_fields(Document(id="2", title="", text=long_sentence), kind="lessons")
    assert 0 < len(fields["title"]) <= 300
    assert (fields["title"] + " " + fields["description"]).split() == long_sentence.split()


@pytest.mark.django_db
def test_first_load_creates_and_embeds_second_load_does_nothing(tiny):
    teams, report = dataset_load(dataset_name=tiny.name, documents=tiny.documents, kind="lessons")
    team = teams[None]
    assert team.slug == "eval-beir_tiny"
    assert (report.created, report.embedded, report.unchanged) == (8, 8, 0)
    lesson = Lesson.objects.get(team=team, external_id="d3")
    assert lesson.title == "Sleep deprivation impairs memory consolidation"
    assert lesson.description.startswith("Subjects kept awake overnight")
    assert lesson.status == "confirmed"
    # The stored vector is the model's embedding of "title\ntext".
    backend = get_embedding_backend()
    expected = backend.embed_documents([lesson.title + "\n" + lesson.description])[0]
    assert float(np.dot(np.asarray(lesson.embedding), expected)) == pytest.approx(1.0, abs=1e-4)

    _, again = dataset_load(dataset_name=tiny.name, documents=tiny.documents, kind="lessons")
    assert (again.created, again.updated, again.deleted, again.embedded, again.unchanged) == (0, 0, 0, 0, 8)
    assert Lesson.objects.filter(team=team).count() == 8


@pytest.mark.django_db
def test_a_document_the_services_store_cleaned_is_unchanged_on_the_next_load(tiny):
    # compared raw with the stored, cleaned text, such a document was "updated" on every load
    documents = [Document(id="z1", title="Zero\u200bwidth", text="A decomposed A\u030a and a ref [6\u200b\u20139]. ")]
    _, first = dataset_load(dataset_name=tiny.name, documents=documents, kind="lessons")
    _, again = dataset_load(dataset_name=tiny.name, documents=documents, kind="lessons")
    assert (first.created, again.updated, again.unchanged) == (1, 0, 1)
    assert Lesson.objects.get(external_id="z1").title == "Zerowidth"


@pytest.mark.django_db
def test_changed_and_removed_documents(tiny):
    dataset_load(dataset_name=tiny.name, documents=tiny.documents, kind="lessons")
    edited = [
        Document(id=d.id, title=d.title, text=d.text + " Confirmed in 2020." if d.id == "d1" else d.text)
        for d in tiny.documents
        if d.id != "d8"
    ]
    teams, report = dataset_load(dataset_name=tiny.name, documents=edited, kind="lessons")
    assert (report.created, report.updated, report.deleted, report.unchanged) == (0, 1, 1, 6)
    assert report.embedded == 1  # only the edited one
    assert Lesson.objects.get(team=teams[None], external_id="d1").description.endswith("Confirmed in 2020.")
    assert not Lesson.objects.filter(team=teams[None], external_id="d8").exists()


@pytest.mark.django_db
def test_model_change_makes_rows_stale(tiny):
    teams, _ = dataset_load(dataset_name=tiny.name, documents=tiny.documents, kind="lessons")
    # Rows embedded by another model carry that model's hash of their text.
    for lesson in Lesson.objects.filter(team=teams[None], external_id__in=["d1", "d2"]):
        old_hash = content_hash(model_name="an-older-model", text=embedding_text(lesson))
        Lesson.objects.filter(pk=lesson.pk).update(embedding_model="an-older-model", content_hash=old_hash)
    report = corpus_embed(team=teams[None], kind="lessons")
    assert report.embedded == 2
    assert set(Lesson.objects.filter(team=teams[None]).values_list("embedding_model", flat=True)) == {
        get_embedding_backend().model_name
    }


@pytest.mark.django_db
def test_memories_kind(tiny):
    teams, report = dataset_load(dataset_name=tiny.name, documents=tiny.documents, kind="memories")
    memory = Memory.objects.get(team=teams[None], external_id="d7")
    assert memory.content == "Salt intake and blood pressure"
    assert memory.details.startswith("Cutting dietary sodium")
    assert memory.embedding is not None
    assert report.embedded == 8


@pytest.mark.django_db
def test_scope_key_gives_each_value_its_own_team(scoped):
    teams, report = dataset_load(
        dataset_name=scoped.name, documents=scoped.documents, kind="memories", scope_key="user"
    )
    assert {value: team.slug for value, team in teams.items()} == {
        None: "eval-beir_scoped",
        "alice": "eval-beir_scoped-alice",
        "bob": "eval-beir_scoped-bob",
    }
    assert sorted(Memory.objects.filter(team=teams["alice"]).values_list("external_id", flat=True)) == ["a1", "a2"]
    assert sorted(Memory.objects.filter(team=teams["bob"]).values_list("external_id", flat=True)) == ["b1", "b2"]
    assert list(Memory.objects.filter(team=teams[None]).values_list("external_id", flat=True)) == ["s1"]
    assert teams["alice"].name == "Evaluation beir_scoped (user=alice)"
    assert report.created == 5


@pytest.mark.django_db
def test_scope_key_that_every_document_and_query_has_makes_no_empty_base_team(scoped):
    # The fixture's "s1" has no user: without it, every row has a scope value.
    documents = [document for document in scoped.documents if document.metadata.get("user")]
    teams, _ = dataset_load(dataset_name=scoped.name, documents=documents, kind="memories", scope_key="user",
                            extra_scope_values=["alice"])
    assert sorted(teams) == ["alice", "bob"]
    assert sorted(Team.objects.values_list("slug", flat=True)) == ["eval-beir_scoped-alice", "eval-beir_scoped-bob"]
    teams, _ = dataset_load(dataset_name=scoped.name, documents=documents, kind="memories", scope_key="user",
                            extra_scope_values=[None])  # a query without the key searches the base team
    assert teams[None].slug == "eval-beir_scoped"
    assert Memory.objects.filter(team=teams[None]).count() == 0


def test_scope_values_that_slugify_alike_get_their_own_slugs():
    slugs = team_slugs(dataset_name="ds", scope_values=["A b", "a-b", None])
    assert slugs[None] == "eval-ds"
    assert len({slugs["A b"], slugs["a-b"], slugs[None]}) == 3


@pytest.mark.django_db
def test_drop_deletes_the_datasets_teams_only(scoped):
    dataset_load(dataset_name=scoped.name, documents=scoped.documents, kind="memories", scope_key="user")
    bystander = TeamFactory(slug="eval-beir_scoped-team", name="Not an evaluation team")
    LessonFactory(team=bystander)
    assert evaluation_teams_drop(dataset_name=scoped.name) == 3
    assert list(Team.objects.values_list("slug", flat=True)) == ["eval-beir_scoped-team"]
    assert Memory.objects.count() == 0
    assert Lesson.objects.filter(team=bystander).count() == 1


@pytest.mark.django_db
def test_loading_schedules_no_per_row_embedding(tiny, django_capture_on_commit_callbacks):
    team = TeamFactory(slug="eval-beir_tiny")
    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        report = corpus_load(team=team, documents=tiny.documents, kind="lessons")
    assert report.created == 8
    assert callbacks == []  # nothing queued per row: the backfill embeds them in batches
    assert Lesson.objects.filter(team=team, embedding__isnull=True).count() == 8
    assert corpus_embed(team=team, kind="lessons").embedded == 8


@pytest.mark.django_db
def test_loading_writes_in_chunks_so_an_interrupted_load_keeps_its_finished_chunks(tiny, monkeypatch):
    # One transaction for a whole corpus made every trigger update walk the versions the load had
    # already left (SciFact slowed to 5-6 rows/s); chunks of LOAD_CHUNK_ROWS commit as they finish.
    from lessons.evaluation import loading

    monkeypatch.setattr(loading, "LOAD_CHUNK_ROWS", 3)
    real_create, calls = loading.lesson_create, []

    def failing_on_the_fifth(**fields):
        calls.append(fields["external_id"])
        if len(calls) == 5:
            raise RuntimeError("the load is interrupted")
        return real_create(**fields)

    monkeypatch.setattr(loading, "lesson_create", failing_on_the_fifth)
    team = TeamFactory(slug="eval-beir_tiny")
    with pytest.raises(RuntimeError):
        corpus_load(team=team, documents=tiny.documents, kind="lessons")
    # the first chunk (3 rows) is kept; the second, interrupted, left nothing half-written
    assert sorted(Lesson.objects.filter(team=team).values_list("external_id", flat=True)) == sorted(calls[:3])

    monkeypatch.setattr(loading, "lesson_create", real_create)
    report = corpus_load(team=team, documents=tiny.documents, kind="lessons")
    assert (report.created, report.unchanged) == (5, 3)
    assert Lesson.objects.filter(team=team).count() == 8


@pytest.mark.django_db
def test_a_load_that_moves_the_average_length_refreshes_the_keyword_impacts():
    # The impacts are written with the team's length when its first row arrived; a corpus whose
    # first document is short left SciFact's team at a drift of 1.4 and a LoCoMo team's at 2.9,
    # and the heads proved fewer answers until something refreshed them (imports did, loads not).
    from lessons.services.keyword_index import keyword_index_state

    team = TeamFactory(slug="eval-drift")
    documents = [Document(id="0", title="Short", text="cache")] + [
        Document(id=str(n), title=f"Lesson {n}", text="cache pool queue retry webhook token " * 8) for n in range(1, 9)
    ]
    report = corpus_load(team=team, documents=documents, kind="lessons")
    assert report.created == 9 and report.impacts_refreshed > 0
    assert "keyword impacts refreshed" in report.summary()
    assert keyword_index_state(team=team, kind="lessons").drift == pytest.approx(1.0)
    # a load that finds nothing drifted rewrites nothing
    assert corpus_load(team=team, documents=documents, kind="lessons").impacts_refreshed == 0


def test_dataset_names_that_slugify_alike_or_get_cut_keep_teams_of_their_own():
    from lessons.evaluation.loading import team_base_slug

    assert team_base_slug(dataset_name="lessons-dev") == "eval-lessons-dev"  # unchanged when slugify keeps it
    assert team_base_slug(dataset_name="probe-\u65e5\u672c") != team_base_slug(dataset_name="probe-\u4e2d\u6587")
    long_a, long_b = "x" * 90 + "-alpha", "x" * 90 + "-beta"
    assert team_base_slug(dataset_name=long_a) != team_base_slug(dataset_name=long_b)
    assert all(len(team_base_slug(dataset_name=name)) <= 80 for name in (long_a, long_b, "probe-\u65e5\u672c"))
