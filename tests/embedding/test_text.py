"""The Python and SQL versions of the embedded text and its hash must agree byte for byte, or the
database would call fresh rows stale (or, worse, stale rows fresh)."""

import sys

import pytest

from lessons.embedding import content_hash, content_hash_sql, embedding_text, embedding_text_sql
from lessons.embedding.text import WHITESPACE
from lessons.models import Lesson, Memory
from tests.factories import LessonFactory, MemoryFactory

pytestmark = pytest.mark.django_db

MODEL_NAME = "sentence-transformers/all-MiniLM-L6-v2"

LESSON_TEXTS = [
    ("Plain title", "A description.", "A recommendation."),
    ("  Title with spaces around  ", "", ""),
    ("Title", "   ", "only the recommendation"),
    ("\t\r\nTitle after control whitespace\x0b\x0c", "\u3000ideographic space\u3000", "\xa0no-break\xa0"),
    ("Inner\r\nlines\n\nkept", " \x85next line\x1c\x1d\x1e\x1f ", "\u2028\u2029separators\u202f\u205f"),
    ("Café ☕ 日本語 🚀", "émigré — “quotes”", "zero\u200bwidth space is not whitespace\u200b"),
    ("T", "", "   \t  "),
    ("   \n   ", "", ""),  # a title of whitespace only: the embedded text is empty
    ("ＲＥＡＣＴ ｈｏｏｋｓ", "ｺｰﾋｰ ﬁle ²", "\u00a8 starts with a space in NFKC"),  # compatibility forms
    ("e\u0301 combining", "Ⅻ ㎏ ①", "\ufe4d\ufe4e"),
]

# (tags, tech_stacks): the label line, written by a raw UPDATE that skips the services.
LESSON_LABELS = [
    (["multi-tenant", "rls"], ["postgresql", "django"]),
    ([], []),  # no labels: no label line, the text is the prose alone
    ([], ["  react "]),
    (["", "x"], []),  # an empty tag still takes its place, as array_to_string keeps it
    (["-"], [" - "]),  # hyphens become spaces, and a line of spaces is no line
    (["Café-☕\u3000", "日本語"], ["\u2003node"]),
    (["ｍｕｌｔｉ－ｔｅｎａｎｔ", "ＲＬＳ"], ["ｐｏｓｔｇｒｅｓｑｌ\u3000"]),  # the full-width hyphen is a hyphen
]

MEMORY_TEXTS = [
    ("Tom plays bass", ""),
    ("  Tom plays bass  ", "  He joined a band in 2019.\n"),
    ("\u2003em space\u2003", "\u1680ogham\u2000"),
    ("Ｔｏｍ ｐｌａｙｓ ｂａｓｓ", "ﾊﾞﾝﾄﾞ"),
]


def assert_python_and_sql_agree(model, pk):
    """The row's text and hash as the database computes them equal the Python functions' on it."""
    row = model.objects.annotate(
        sql_text=embedding_text_sql(model), sql_hash=content_hash_sql(model=model, model_name=MODEL_NAME)
    ).get(pk=pk)
    python_text = embedding_text(row)
    assert row.sql_text == python_text
    assert row.sql_hash == content_hash(model_name=MODEL_NAME, text=python_text)


def test_whitespace_is_exactly_what_str_strip_removes():
    every_space = "".join(chr(code) for code in range(sys.maxunicode + 1) if chr(code).isspace())
    assert WHITESPACE == every_space


@pytest.mark.parametrize("title, description, recommendation", LESSON_TEXTS)
def test_lesson_text_and_hash_agree_between_python_and_sql(team, title, description, recommendation):
    lesson = LessonFactory(team=team, title="placeholder")
    # A raw UPDATE keeps the surrounding whitespace the services would have trimmed.
    Lesson.objects.filter(pk=lesson.pk).update(title=title, description=description, recommendation=recommendation)
    assert_python_and_sql_agree(Lesson, lesson.pk)


@pytest.mark.parametrize("tags, tech_stacks", LESSON_LABELS)
@pytest.mark.parametrize("title, description", [("Title", "Text."), ("   ", "")])
def test_lesson_label_line_agrees_between_python_and_sql(team, title, description, tags, tech_stacks):
    lesson = LessonFactory(team=team, title="placeholder")
    Lesson.objects.filter(pk=lesson.pk).update(
        title=title, description=description, recommendation="", tags=tags, tech_stacks=tech_stacks
    )
    assert_python_and_sql_agree(Lesson, lesson.pk)


def test_the_label_line_follows_the_text():
    lesson = Lesson(
        title="Use SET LOCAL for the tenant", description="", recommendation="Scope it to the transaction.",
        category="security", tags=["multi-tenant", "rls"], tech_stacks=["postgresql", "pgbouncer"],
    )
    assert embedding_text(lesson) == (
        "Use SET LOCAL for the tenant\nScope it to the transaction.\nmulti tenant, rls; postgresql, pgbouncer"
    )
    assert embedding_text(Lesson(title="T", tags=[], tech_stacks=["go"])) == "T\ngo"
    assert embedding_text(Lesson(title="T", category="security")) == "T"  # the category is not embedded


@pytest.mark.parametrize("content, details", MEMORY_TEXTS)
def test_memory_text_and_hash_agree_between_python_and_sql(team, content, details):
    memory = MemoryFactory(team=team)
    Memory.objects.filter(pk=memory.pk).update(content=content, details=details)
    assert_python_and_sql_agree(Memory, memory.pk)


def test_embedding_text_trims_and_skips_empty_parts():
    lesson = Lesson(title="  Keep keys out of git ", description=" \u3000 ", recommendation="\tUse a vault.\n")
    assert embedding_text(lesson) == "Keep keys out of git\nUse a vault."
    memory = Memory(content="Ana likes tea", details="")
    assert embedding_text(memory) == "Ana likes tea"


def test_hash_changes_with_the_model_and_with_the_text():
    base = content_hash(model_name=MODEL_NAME, text="abc")
    assert len(base) == 64
    assert content_hash(model_name="other/model", text="abc") != base
    assert content_hash(model_name=MODEL_NAME, text="abd") != base
    # The NUL separator keeps model and text apart.
    assert content_hash(model_name="ab", text="c") != content_hash(model_name="a", text="bc")


def test_the_model_reads_compatibility_forms_as_the_query_does():
    lesson = Lesson(
        title="ＲＥＡＣＴ ｈｏｏｋｓ", description="ｺｰﾋｰ", recommendation="", tags=["ｍｕｌｔｉ－ｔｅｎａｎｔ"], tech_stacks=[]
    )
    assert embedding_text(lesson) == "REACT hooks\nコーヒー\nmulti tenant"
    assert embedding_text(Memory(content="Ｔｏｍ", details="")) == "Tom"


def test_text_already_in_compatibility_form_keeps_its_hash():
    """Only rows whose text NFKC changes turn stale after the upgrade: the rest hash as before."""
    lesson = Lesson(title="Keep keys out of git", description="Café 日本語", recommendation="", tags=["rls"])
    assert content_hash(model_name=MODEL_NAME, text=embedding_text(lesson)) == content_hash(
        model_name=MODEL_NAME, text="Keep keys out of git\nCafé 日本語\nrls"
    )
