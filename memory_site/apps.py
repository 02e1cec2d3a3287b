"""The site's own AppConfigs."""

from django.contrib import admin
from django.contrib.admin.apps import SimpleAdminConfig
from django.contrib.admin.checks import check_admin_app, check_dependencies
from django.core import checks


class AdminConfig(SimpleAdminConfig):
    """django.contrib.admin, its modules imported with the URLconf instead of at every django.setup().

    Django's own AdminConfig imports every app's admin module in ready(): ~0.3 s of the
    curation console's services, selectors and forms, paid by every management command, though
    only a request (or `manage.py check`) needs them. Here memory_site/urls.py runs
    `admin.autodiscover()`, and the admin's system check runs it first, so `manage.py check`
    still checks every registered ModelAdmin."""

    def ready(self):
        checks.register(check_dependencies, checks.Tags.admin)
        checks.register(check_discovered_admin_app, checks.Tags.admin)


def check_discovered_admin_app(app_configs, **kwargs):
    admin.autodiscover()
    return check_admin_app(app_configs, **kwargs)
