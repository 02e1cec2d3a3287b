"""Reading lessons and memories one by one or as filtered lists, always within one team.

Every function starts from the team's own rows, so a row of another team is never found: it
raises `DoesNotExist` exactly as an id that was never used. Lists are querysets, newest first,
for the caller to paginate.
"""

from django.db.models import QuerySet
from ninja import FilterSchema

from lessons.models import CURRENT_MEMORY, MEMORY_HAPPENED_AT, Lesson, Memory, Team
from lessons.search.kinds import SEARCH_KINDS
from lessons.search.spellings import spelled_values, stored_spellings

# The list filters over stored terms, as a search's filters read them: in every spelling the team
# stores (`tech_stack=nextjs` also lists the lessons saying `next.js`).
LESSON_TERM_FILTERS = ("tech_stack", "project_type", "tag")
MEMORY_TERM_FILTERS = ("category", "emotion")


def _spelled(filters: FilterSchema, names: tuple[str, ...], *, kind: str, team: Team) -> FilterSchema:
    given = {name: getattr(filters, name) for name in names if getattr(filters, name, None)}
    if not given:
        return filters
    stored = stored_spellings(kind_code=SEARCH_KINDS[kind].keyword_code, team_id=team.pk,
                              values=[value for values in given.values() for value in values])
    return filters.model_copy(update={name: spelled_values(values, stored) for name, values in given.items()})


def lesson_list(*, team: Team, filters: FilterSchema | None = None) -> QuerySet[Lesson]:
    lessons = Lesson.objects.filter(team=team).defer("embedding", "search_vector").order_by("-updated_at", "-id")
    if filters is None:
        return lessons
    return _spelled(filters, LESSON_TERM_FILTERS, kind="lessons", team=team).filter(lessons)


def lesson_get(*, team: Team, lesson_id: int) -> Lesson:
    lesson = Lesson.objects.filter(team=team, pk=lesson_id).first()
    if lesson is None:
        raise Lesson.DoesNotExist(f"lesson {lesson_id} does not exist")
    return lesson


# A memory happened at `occurred_at`, else when it was stored (as a search's since/until read it);
# the id breaks ties, so pages do not overlap. Each order has its index (lessons.models.Memory).
MEMORY_ORDERINGS = {
    "-updated_at": ("-updated_at", "-id"),
    "occurred_at": (MEMORY_HAPPENED_AT.asc(), "id"),
    "-occurred_at": (MEMORY_HAPPENED_AT.desc(), "-id"),
    "-importance": ("-importance", "-updated_at", "-id"),
}


def memory_list(*, team: Team, filters: FilterSchema | None = None, order: str = "-updated_at") -> QuerySet[Memory]:
    """Current memories only, in `order` (a key of MEMORY_ORDERINGS); earlier versions are reached
    through `memory_versions`."""
    memories = (
        Memory.objects.filter(CURRENT_MEMORY, team=team).defer("embedding", "search_vector")
        .order_by(*MEMORY_ORDERINGS[order])
    )
    if filters is None:
        return memories
    return _spelled(filters, MEMORY_TERM_FILTERS, kind="memories", team=team).filter(memories)


def memory_get(*, team: Team, memory_id: int) -> Memory:
    memory = Memory.objects.filter(team=team, pk=memory_id, current_version__isnull=True).first()
    if memory is None:
        # an id read from a version list names a row, only not a current one: say which it is of
        current = Memory.objects.filter(team=team, pk=memory_id).values_list("current_version_id", flat=True)
        if current_id := next(iter(current), None):
            raise Memory.DoesNotExist(f"memory {memory_id} is an earlier version of memory {current_id}")
        raise Memory.DoesNotExist(f"memory {memory_id} does not exist")
    return memory


def memory_versions(*, memory: Memory) -> list[Memory]:
    """The memory as it stands and every earlier text of it, newest first, each with `written_at`
    (when its text became the memory's) and `replaced_at` (when a later one replaced it; None for
    the current text). The current row's own dates are the memory's: `created_at` its creation,
    `updated_at` its last change of any field, neither when its text was written."""
    earlier = list(memory.previous_versions.defer("embedding", "search_vector").order_by("-version"))
    for version in earlier:  # archived with created_at = written, updated_at = replaced
        version.written_at, version.replaced_at = version.created_at, version.updated_at
    memory.written_at = earlier[0].updated_at if earlier else memory.created_at
    memory.replaced_at = None
    return [memory, *earlier]
