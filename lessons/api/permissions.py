"""What staff signed in to the admin may do through the API: what Django's permissions on each
model say, as in the admin (view to read and search, add to create, change to edit, accept, reject,
restore, dismiss and report usage, delete to delete; a merge deletes, so it needs both).

An API key answers for its whole team and is not checked here: the key is the permission.
"""

import functools

from django.http import HttpRequest

from lessons.models import Lesson, Memory

MODELS = {"lessons": Lesson, "memories": Memory}


class PermissionRefused(Exception):
    """A staff session lacks the Django permission a route needs (403)."""

    def __init__(self, message: str):
        super().__init__(message)
        self.message = message


def is_staff_session(request: HttpRequest) -> bool:
    """The caller signed in to the admin (an API key's caller has no user)."""
    return getattr(request.auth, "user_id", None) is not None


def require_permission(request: HttpRequest, *, kind: str, actions: tuple[str, ...]) -> None:
    """Raise PermissionRefused when the caller is staff without each `action` on `kind`'s model."""
    if not is_staff_session(request):
        return
    meta = MODELS[kind]._meta
    missing = [
        action for action in actions if not request.user.has_perm(f"{meta.app_label}.{action}_{meta.model_name}")
    ]
    if missing:
        raise PermissionRefused(
            f"your account may not {' or '.join(missing)} {meta.verbose_name_plural} "
            f"(Django permission {meta.app_label}.{missing[0]}_{meta.model_name}; ask an administrator)"
        )


def needs(kind: str, *actions: str):
    """Decorate a handler (under the router's decorator) that needs `actions` on `kind`."""

    def decorate(handler):
        @functools.wraps(handler)
        def checked(request, *args, **kwargs):
            require_permission(request, kind=kind, actions=actions)
            return handler(request, *args, **kwargs)

        return checked

    return decorate
