"""`python manage.py collectstatic`: Django's, refusing in this project's words when there is
nowhere to copy to. Django's own refusal names the STATIC_ROOT setting ("You're using the
staticfiles app without having set the STATIC_ROOT setting"), which an operator never edits here:
it comes from DJANGO_STATIC_ROOT (memory_site/settings.py)."""

from django.contrib.staticfiles.management.commands import collectstatic
from django.core.management.base import CommandError


class Command(collectstatic.Command):
    def handle(self, **options):
        if self.is_local_storage() and not self.storage.location:
            raise CommandError(
                "collectstatic needs DJANGO_STATIC_ROOT: set it to the directory to copy static files into "
                "(only for a proxy that serves them; WhiteNoise serves them without it)"
            )
        return super().handle(**options)
