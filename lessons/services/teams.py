"""Teams: every lesson, memory and API key belongs to one. Validated before anything is written,
so a bad slug is a clear message naming the field, never a database error."""

import re

from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from django.utils.text import slugify

from lessons.models import Team
from lessons.selectors.admin_search import EVALUATION_TEAM_PREFIX
from lessons.selectors.teams import TeamContents, TeamError, team_contents, team_named

# The slug rule as the model checks it (SlugField's validate_slug: ASCII only; lowercase_slug):
# Django's own message said "letters, numbers, underscores or hyphens", and "ünï" is letters.
SLUG_RULE = "lowercase ASCII letters (a-z), digits, hyphens and underscores, at most 100 characters"
_SLUG_CHARACTERS = re.compile(r"[-a-zA-Z0-9_]+")  # case is the model's check, with its own message

# The admin lists hide evaluation teams, so a team made by hand under the prefix ("eval-demo") was
# created and then nowhere to be seen. Said by the admin's slug field and by every creator here.
RESERVED_SLUG_RULE = (
    f"Slugs starting with “{EVALUATION_TEAM_PREFIX}” are reserved for the evaluation teams that eval_retrieval "
    "loads, which the lesson, memory and team lists hide; choose another slug."
)


def slug_is_reserved(slug: str) -> bool:
    """True for a slug only the evaluation tools may give a team (RESERVED_SLUG_RULE)."""
    return slug.strip().lower().startswith(EVALUATION_TEAM_PREFIX)


def _validation_message(error: ValidationError) -> str:
    return "; ".join(f"{field}: {' '.join(messages)}" for field, messages in error.message_dict.items())


def team_create(*, slug: str, name: str | None = None, allow_reserved: bool = False) -> Team:
    """A new team. The slug is used as given (SLUG_RULE); a bad, capitalised or taken slug raises
    TeamError before any write, and so does a reserved one (RESERVED_SLUG_RULE) unless
    `allow_reserved` (team_get_or_create: the evaluation tools making their own teams)."""
    slug = (slug or "").strip()
    if not slug:  # said once, for the slug (the name, left out, defaults to it)
        raise TeamError(f"slug: a team needs a slug ({SLUG_RULE})")
    if not _SLUG_CHARACTERS.fullmatch(slug):
        raise TeamError(f"slug: {slug!r} is not a usable slug; use only {SLUG_RULE} (e.g. acme)")
    if slug_is_reserved(slug) and not allow_reserved:
        raise TeamError(f"slug: {slug!r} is not available. {RESERVED_SLUG_RULE}")
    team = Team(slug=slug, name=(name or "").strip() or slug)
    try:
        team.full_clean()  # length, slug characters, uniqueness: all before the INSERT
    except ValidationError as error:
        if "slug" in error.message_dict and Team.objects.filter(slug=slug).exists():
            raise TeamError(f"slug: a team with slug {slug!r} already exists") from error
        raise TeamError(_validation_message(error)) from error
    try:
        with transaction.atomic():
            team.save()
    except IntegrityError as error:  # created by someone else between the check and the write
        raise TeamError(f"slug: a team with slug {slug!r} already exists") from error
    return team


def team_for_slug(*, slug: str, create: bool = False, name: str | None = None) -> Team:
    """The team with this slug. Unknown: created when `create`, otherwise TeamError saying how
    (a mistyped --team must not quietly start a new, empty team)."""
    try:
        return team_named(slug=slug, hint=_create_hint(slug))
    except TeamError:
        if not create:
            raise
    try:
        return team_create(slug=slug, name=name)
    except TeamError:
        # created by another writer since the lookup (two imports with --create-team at once)
        created_meanwhile = Team.objects.filter(slug=(slug or "").strip()).first()
        if created_meanwhile is None:
            raise
        return created_meanwhile


def _create_hint(slug: str) -> str:
    """How to create the team a command could not find, when the slug could be one."""
    clean = (slug or "").strip()
    if slug_is_reserved(clean):  # not to be made by hand: create_team refuses it
        return (f"; teams starting with “{EVALUATION_TEAM_PREFIX}” are made by eval_retrieval when it loads "
                "a dataset")
    if clean and clean == slugify(clean):
        return f"; create it with --create-team or `python manage.py create_team {clean}`"
    return f"; a slug is {SLUG_RULE}"


def team_get_or_create(*, slug: str, name: str | None = None) -> Team:
    """The team with this slug (slugified), created (named after the slug unless a name is given)
    if missing. For tools that own their team (evaluation, benchmarks): an `eval-` slug is theirs."""
    clean_slug = slugify(slug)
    if not clean_slug:
        raise TeamError(f"{slug!r} is not a usable team slug")
    existing = Team.objects.filter(slug=clean_slug).first()
    if existing is not None:
        return existing
    try:
        return team_create(slug=clean_slug, name=name, allow_reserved=True)
    except TeamError:
        existing = Team.objects.filter(slug=clean_slug).first()
        if existing is None:
            raise
        return existing


def team_delete(*, team: Team) -> TeamContents:
    """Deletes the team with everything in it (lessons, memories and their versions, API keys,
    recorded searches and feedback, merges, dismissals; the keyword index's rows go by trigger),
    in one transaction, and returns what it held. The team row is locked first, so nothing can be
    added to it between the count and the delete."""
    with transaction.atomic():
        Team.objects.select_for_update().filter(pk=team.pk).first()
        contents = team_contents(team=team)
        team.delete()
    return contents
