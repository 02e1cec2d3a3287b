"""Factories for every model, in one place."""

import factory

from lessons.models import Lesson, Memory, Team


class TeamFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Team
        django_get_or_create = ("slug",)

    slug = factory.Sequence(lambda n: f"team-{n}")
    name = factory.LazyAttribute(lambda team: team.slug.replace("-", " ").title())


class LessonFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Lesson

    team = factory.SubFactory(TeamFactory)
    title = factory.Sequence(lambda n: f"Lesson number {n}")
    description = "Something that went wrong and what we learned from it."
    recommendation = "Do the careful thing."
    category = "workflow"
    confidence = 0.7
    frequency = 1
    tech_stacks = factory.LazyFunction(list)
    project_types = factory.LazyFunction(list)
    tags = factory.LazyFunction(list)
    status = "confirmed"


class MemoryFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Memory

    team = factory.SubFactory(TeamFactory)
    content = factory.Sequence(lambda n: f"Memory number {n}")
    details = ""
    categories = factory.LazyFunction(lambda: ["event"])
    importance = 5
    people = factory.LazyFunction(list)
    emotions = factory.LazyFunction(list)
