from django.utils.text import slugify

from lessons.models import Team


def team_get_or_create(*, slug: str, name: str | None = None) -> Team:
    """The team with this slug, created (named after the slug unless a name is given) if missing."""
    clean_slug = slugify(slug)
    if not clean_slug:
        raise ValueError(f"{slug!r} is not a usable team slug")
    team, created = Team.objects.get_or_create(slug=clean_slug, defaults={"name": name or clean_slug})
    if created:
        team.full_clean()
    return team
