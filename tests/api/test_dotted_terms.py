"""A term may start with a dot and a letter or digit: ".net" is how .NET is written.

It was refused ("start with a letter or digit"), so a .NET team could tag its lessons only under
another name ("net", "dotnet") that nobody searching for .NET types. A dot alone, or one before
anything but a letter or digit, is still refused, naming the item."""

import pytest

from lessons.models import Lesson
from lessons.search import SearchRequest, search
from lessons.services.lessons import lesson_create

pytestmark = pytest.mark.django_db


def test_a_dotted_tech_stack_is_stored_listed_and_filtered(api, team):
    response = api.post("/lessons", {"title": "Register scoped services once", "tech_stacks": [".NET", "c#"],
                                     "tags": [".net-core"]})
    assert response.status_code == 201, response.content
    lesson = Lesson.objects.get(pk=response.json()["id"])
    assert (lesson.tech_stacks, lesson.tags) == ([".net", "c#"], [".net-core"])
    lesson_create(team=team, title="Pin the Node version", tech_stacks=["node"])
    listed = api.get("/lessons", {"tech_stack": ".net"}).json()["items"]
    assert [row["id"] for row in listed] == [lesson.pk]
    found = api.post("/search", {"query": "scoped services", "filters": {"tech_stacks": [".NET"]}, "mode": "text"})
    assert found.status_code == 200, found.content
    assert [hit["id"] for hit in found.json()["results"]] == [lesson.pk]


@pytest.mark.parametrize("query", [".NET", ".net", "net"])
def test_a_query_naming_the_dotted_term_finds_it_as_an_exact_term(team, query):
    dotted = lesson_create(team=team, title="Register scoped services once", tech_stacks=[".net"]).pk
    lesson_create(team=team, title="Register the service worker once", description="Not the network tab.",
                  tech_stacks=["javascript"])
    response = search(request=SearchRequest(team=team, query=query, mode="text", explain=True))
    assert response.candidates["exact"] == 1
    assert [hit.id for hit in response.results] == [dotted]


@pytest.mark.parametrize("term", [".", "..net", ".-net", ". net", "#net"])
def test_a_dot_before_anything_but_a_letter_or_digit_is_still_refused(api, team, term):
    response = api.post("/lessons", {"title": "x", "tags": ["ok", term]})
    assert response.status_code == 422
    rule = "Use ASCII letters, digits, spaces and + # . _ - (start with a letter or digit, or a dot and one: .net)."
    assert response.json()["errors"] == [{"field": "tags.1", "message": rule}]
    assert not Lesson.objects.exists()
