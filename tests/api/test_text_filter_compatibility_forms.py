"""A list's `text` filter reads both sides in their Unicode compatibility form (NFKC), as a search does.

The keyword index and the query read "ＲＥＡＣＴ" (full-width Latin, as a Chinese or Japanese keyboard types
it) as "REACT", "ｺｰﾋｰ" (half-width Katakana) as "コーヒー" and "①" as "1" (migrations 0030/0031). The list
filters only had unaccent(), which folds full-width Latin but not the rest: `?text=ｺｰﾋｰ` found no "コーヒー"
memory (nor the reverse), "①" no "Step 1", and a full-width comma after a word ("react，") was part of the
word, so the filter found nothing."""

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from lessons.services.lessons import lesson_create
from lessons.services.memories import memory_create


def _found(api, path, text) -> list[int]:
    response = api.get(path, {"text": text})
    assert response.status_code == 200, response.content
    return [row["id"] for row in response.json()["items"]]


@pytest.mark.django_db
def test_full_width_latin_finds_plain_latin_and_the_reverse(api, team):
    plain = lesson_create(team=team, title="React hooks", description="Keep effects small").pk
    wide = lesson_create(team=team, title="Pin versions", description="ＲＥＡＣＴ ｈｏｏｋｓ drift").pk
    lesson_create(team=team, title="Vue stores", description="Keep them flat")
    assert sorted(_found(api, "/lessons", "ＲＥＡＣＴ")) == sorted([plain, wide])
    assert sorted(_found(api, "/lessons", "react hooks")) == sorted([plain, wide])
    assert _found(api, "/lessons", "ｅｆｆｅｃｔｓ") == [plain]


@pytest.mark.django_db
def test_a_compatibility_digit_is_its_digit(api, team):
    found = lesson_create(team=team, title="Step 1: back up", description="Before the upgrade").pk
    lesson_create(team=team, title="Step 2: upgrade", description="Then restart")
    assert _found(api, "/lessons", "step ①") == [found]


@pytest.mark.django_db
def test_full_width_punctuation_around_a_word_is_set_aside(api, team):
    found = lesson_create(team=team, title="React hooks", description="Keep effects small").pk
    assert _found(api, "/lessons", "react，") == [found]  # U+FF0C, a full-width comma
    assert _found(api, "/lessons", "（hooks）") == [found]  # U+FF08 and U+FF09
    # punctuation alone is no word to look for, full-width as well
    response = api.get("/lessons", {"text": "？！"})
    assert response.status_code == 422
    assert response.json()["errors"][0]["field"] == "text"


@pytest.mark.django_db
def test_half_width_katakana_finds_full_width_and_the_reverse(api, team):
    full = memory_create(team=team, content="朝にコーヒーを飲んだ").pk
    half = memory_create(team=team, content="Tea, then ｺｰﾋｰ with Ana").pk
    memory_create(team=team, content="紅茶を飲んだ")
    assert sorted(_found(api, "/memories", "ｺｰﾋｰ")) == sorted([full, half])
    assert sorted(_found(api, "/memories", "コーヒー")) == sorted([full, half])


@pytest.mark.django_db
def test_a_word_in_full_width_and_in_ascii_is_looked_for_once(api, team):
    found = memory_create(team=team, content="Fixed the React build").pk
    with CaptureQueriesContext(connection) as issued:
        assert _found(api, "/memories", "ＲＥＡＣＴ react Ｒｅａｃｔ") == [found]
    # one word in the content or the details: two matches, in the count and in the page
    assert [q["sql"].count("~*") for q in issued.captured_queries if "~*" in q["sql"]] == [2, 2]
