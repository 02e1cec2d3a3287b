import pytest
from django.db import connection
from django.db.migrations.recorder import MigrationRecorder

from lessons.embedding import get_embedding_backend, warm_up
from lessons.selectors import health
from lessons.services.api_keys import api_key_create
from lessons.services.lessons import lesson_create
from lessons.services.memories import memory_create
from tests.api.conftest import JsonClient


@pytest.mark.django_db
def test_health_reports_database_model_and_coverage(team):
    warm_up()  # what a gunicorn worker does before it takes traffic
    lesson_create(team=team, title="Index foreign keys", description="Joins on unindexed keys are slow.")
    response = JsonClient().get("/health")
    assert response.status_code == 200, response.content
    body = response.json()
    backend = get_embedding_backend()
    assert body["database"]["ok"] is True
    assert body["database"]["pgvector"]
    assert body["model"] == {
        "name": backend.model_name,
        "available": backend.available,
        "loading": False,
        "reason": backend.unavailable_reason,
    }
    assert body["status"] == "ok" and body["ready"] is True and body["reason"] is None
    lessons = body["embeddings"]["lessons"]
    assert set(lessons) == {"fresh", "stale", "missing"}
    assert sum(lessons.values()) == 1
    assert "acme" not in response.content.decode()  # no team, key or row is named


@pytest.mark.django_db(transaction=True)
def test_database_down_is_503_with_a_reason(team, caplog):
    _, raw_key = api_key_create(team=team, name="agent")
    real_name = connection.settings_dict["NAME"]
    connection.close()
    connection.settings_dict["NAME"] = "memory_store_no_such_database"
    try:
        health = JsonClient().get("/health")
        listing = JsonClient(raw_key).get("/lessons")
    finally:
        connection.close()
        connection.settings_dict["NAME"] = real_name
    assert health.status_code == 503
    assert health.json()["status"] == "unavailable" and health.json()["ready"] is False
    assert health.json()["reason"].startswith("database unavailable")
    # The public answer names the kind of fault; where (the server, the database's name) is in the log.
    assert "memory_store_no_such_database" not in health.content.decode()
    assert health.json()["database"]["reason"].startswith("OperationalError: the database does not answer")
    logged = [record.getMessage() for record in caplog.records if record.name == "lessons.selectors.health"]
    assert any("memory_store_no_such_database" in line and "\n" not in line for line in logged), logged
    assert listing.status_code == 503
    assert "database is unavailable" in listing.json()["detail"]


@pytest.mark.django_db
def test_new_code_on_an_unmigrated_database_is_not_ready_and_says_to_migrate(team, monkeypatch, caplog):
    """A deploy that starts the new code before `migrate`: health said ready, and reads of the new
    column were 500s ("internal error (ProgrammingError)")."""
    _, raw_key = api_key_create(team=team, name="agent")
    lesson = lesson_create(team=team, title="Index foreign keys")
    monkeypatch.setattr(health, "_migrated", False)
    latest = MigrationRecorder.Migration.objects.filter(app="lessons").latest("id")
    with connection.cursor() as cursor:  # a column the code reads and the schema lacks (rolled back)
        cursor.execute("ALTER TABLE lessons_lesson RENAME COLUMN imported_digest TO not_yet")
    latest.delete()

    probe = JsonClient().get("/health")
    assert probe.status_code == 503
    assert probe.json()["ready"] is False and probe.json()["status"] == "unavailable"
    assert probe.json()["reason"] == ("the database is not migrated to this version of the code (1 migration(s) "
                                      "to apply): run `python manage.py migrate`")
    read = JsonClient(raw_key).get(f"/lessons/{lesson.pk}")
    assert read.status_code == 503
    assert read.json()["detail"] == ("the database is not migrated to this version of the service; an operator "
                                     "must run `python manage.py migrate`")
    assert "imported_digest" in caplog.text  # the log names what is missing; the answer does not
    assert "imported_digest" not in read.content.decode()


@pytest.mark.django_db
def test_a_function_of_an_extension_not_created_yet_says_to_migrate(team, monkeypatch):
    """Migration 0022 creates `unaccent`, which the person search calls: before `migrate`, the
    search was an internal error."""
    _, raw_key = api_key_create(team=team, name="agent")
    memory_create(team=team, content="Coffee with Zoë", people=["Zoë"])
    monkeypatch.setattr(health, "_migrated", False)
    with connection.cursor() as cursor:  # rolled back with the test
        cursor.execute("DROP EXTENSION unaccent")
    MigrationRecorder.Migration.objects.filter(app="lessons", name="0022_unaccent").delete()
    found = JsonClient(raw_key).get("/memories/by-person", {"name": "Zoe"})
    assert found.status_code == 503
    assert found.json()["detail"].startswith("the database is not migrated to this version of the service")
    assert JsonClient().get("/health").json()["ready"] is False


@pytest.mark.django_db
def test_a_schema_rolled_back_under_a_running_server_makes_health_look_again(team, monkeypatch):
    # health had found every migration applied once, and said ready while the API answered 503
    _, raw_key = api_key_create(team=team, name="agent")
    lesson = lesson_create(team=team, title="Index foreign keys")
    monkeypatch.setattr(health, "_migrated", False)
    assert JsonClient().get("/health").json()["ready"] is True
    with connection.cursor() as cursor:  # a restored backup, a rollback: the schema went back
        cursor.execute("ALTER TABLE lessons_lesson RENAME COLUMN imported_digest TO not_yet")
    MigrationRecorder.Migration.objects.filter(app="lessons").latest("id").delete()
    assert JsonClient(raw_key).get(f"/lessons/{lesson.pk}").status_code == 503
    assert JsonClient().get("/health").json()["ready"] is False


@pytest.mark.django_db
def test_not_ready_while_the_model_loads_and_when_it_is_off(settings):
    # A configuration of its own: a new backend, not loaded yet.
    settings.EMBEDDING_BACKEND = {**settings.EMBEDDING_BACKEND, "BATCH_SIZE": 19}
    backend = get_embedding_backend()
    assert not backend.load_settled
    body = JsonClient().get("/health").json()  # answers at once, and starts the load
    assert (body["ready"], body["reason"], body["model"]["loading"]) == (
        False, "the embedding model is still loading", True,
    )
    from lessons.embedding import warm_up_in_background

    warm_up_in_background().join(timeout=120)
    body = JsonClient().get("/health").json()
    assert (body["ready"], body["status"], body["model"]["loading"]) == (True, "ok", False)

    settings.EMBEDDINGS_ENABLED = False
    body = JsonClient().get("/health").json()
    assert (body["ready"], body["status"]) == (False, "degraded")
    assert "EMBEDDINGS_ENABLED=0" in body["reason"]


def test_a_chunked_body_is_named_rather_than_called_empty(db, team):
    from lessons.services.api_keys import api_key_create

    _, raw_key = api_key_create(team=team, name="agent")
    response = JsonClient(raw_key).client.post(
        "/api/v1/search", b"", content_type="application/json", HTTP_TRANSFER_ENCODING="chunked"
    )
    assert response.status_code == 400
    assert response.json()["errors"] == [
        {"field": "body", "message": "a chunked body (Transfer-Encoding: chunked) is not read here; "
                                     "send it with a Content-Length"}
    ]
