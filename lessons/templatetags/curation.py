"""Template tags of the curation pages."""

from django import template

from lessons.selectors.curation import lesson_merge_history, memory_merge_history, proposals_waiting_by_team
from lessons.selectors.curation import memory_history as memory_history_selector

register = template.Library()


@register.inclusion_tag("admin/lessons/memory/includes/history.html", takes_context=True)
def memory_history(context, memory):
    """A memory's versions, oldest to newest, with word-level diffs and restore buttons."""
    entries = memory_history_selector(memory=memory)
    current = next((entry.version for entry in entries if entry.is_current), memory)
    request = context.get("request")
    return {
        "entries": entries,
        "current": current,
        "shown": memory,
        # Also on an earlier version's (read-only) page: the restore acts on the current memory.
        "can_restore": request is not None and request.user.has_perm("lessons.change_memory"),
        "csrf_token": context.get("csrf_token"),
    }


@register.simple_tag
def proposals_waiting() -> int:
    """How many proposals wait for a curator, in every team (the index's "Review proposals")."""
    return sum(proposals_waiting_by_team().values())


@register.simple_tag
def memory_version_count(memory) -> int:
    """How many versions the memory `memory` belongs to has (itself included)."""
    current_id = memory.current_version_id or memory.pk
    return 1 + type(memory).objects.filter(current_version_id=current_id).count()


@register.inclusion_tag("admin/lessons/lesson/includes/merges.html")
def lesson_merges(lesson):
    """The lessons merged into `lesson`, newest merge first, as they were."""
    return {"merges": lesson_merge_history(lesson=lesson), "lesson": lesson}


@register.inclusion_tag("admin/lessons/memory/includes/merges.html")
def memory_merges(memory):
    """The memories merged into `memory` (its current memory, on an earlier version's page), newest
    merge first, as they were."""
    current = memory if memory.current_version_id is None else memory.current_version
    return {"merges": memory_merge_history(memory=current), "memory": current}
