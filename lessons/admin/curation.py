"""What the curation pages (proposals, duplicates, memory history) share: the team being curated,
the page's context, and turning a service's refusal into an admin message.

The pages are plain admin views added by `LessonAdmin.get_urls` / `MemoryAdmin.get_urls`; like
the API they read through `lessons.selectors.curation` and write through `lessons.services.curation`
(and the lesson services for accept / reject)."""

from django import forms
from django.contrib import messages
from django.contrib.admin.models import CHANGE, DELETION, LogEntry
from django.core.exceptions import PermissionDenied
from django.http import HttpResponseRedirect

from lessons.models import Team


def team_label(team: Team) -> str:
    """A team as the console names it wherever one is picked or shown: "Acme (acme)", or the slug
    alone when it is the name. A name need not be unique (two teams "demo"); the slug is."""
    return f"{team.name} ({team.slug})" if team.name and team.name != team.slug else team.slug


class TeamField(forms.ModelChoiceField):
    notes: dict[int, str] = {}  # a word beside a team's name, by team id ("3 waiting")

    def label_from_instance(self, team):
        label = team_label(team)
        return f"{label} \N{EM DASH} {self.notes[team.pk]}" if team.pk in self.notes else label


def team_field() -> TeamField:
    return TeamField(queryset=Team.objects.order_by("slug"), to_field_name="slug", empty_label=None, required=False)


def chosen_team(team: Team | None) -> Team | None:
    """The team a page's filter named, or the first team (by slug) when it named none."""
    return team or Team.objects.order_by("slug").first()


def page_context(model_admin, request, *, title: str, **extra) -> dict:
    return {
        **model_admin.admin_site.each_context(request),
        "opts": model_admin.model._meta,
        "app_label": model_admin.model._meta.app_label,
        "title": title,
        **extra,
    }


def require(allowed: bool) -> None:
    if not allowed:
        raise PermissionDenied


def back_to(request, fallback: str) -> HttpResponseRedirect:
    """Back to the page the form was on (its query string kept: team, threshold, page)."""
    target = request.POST.get("next") or fallback
    if not target.startswith("/") or target.startswith("//"):
        target = fallback  # only paths on this site
    return HttpResponseRedirect(target)


def refused(request, error: Exception) -> None:
    """A service said no (a ValidationError, or a row that no longer exists): tell the curator
    why, in the admin's own message list."""
    if hasattr(error, "error_dict"):
        text = "; ".join(" ".join(messages_) for messages_ in error.message_dict.values())
    else:
        text = " ".join(getattr(error, "messages", None) or [str(error)])
    messages.error(request, text)


def post_int(request, name: str) -> int | None:
    try:
        value = int(request.POST.get(name, ""))
    except ValueError:
        return None
    return value if value > 0 else None


def log_curation(request, rows, message: str) -> None:
    """Record a curation step (accept, reject, merge, restore) in the admin's history of each row,
    as a form's save is: these pages write through the services, which log nothing, so a row's
    History page said it had no history and "Recent actions" showed only form edits."""
    LogEntry.objects.log_actions(user_id=request.user.pk, queryset=list(rows), action_flag=CHANGE,
                                 change_message=message)


def log_merged_away(request, row, message: str) -> None:
    """The row a merge deleted, logged as a deletion (as the admin logs one) that says where it went."""
    LogEntry.objects.log_actions(user_id=request.user.pk, queryset=[row], action_flag=DELETION,
                                 change_message=message)
