"""API keys: created (the raw key is returned once and never stored), checked, revoked.

A key looks like `msk_<8 hex>_<43 url-safe chars>` (256 random bits). Only its SHA-256 is stored:
a high-entropy key needs no slow hash, and a lookup by digest is one indexed query. The first
12 characters are kept as `prefix` so a person can tell keys apart without seeing them.

A key answers for its whole team with every action the API has (lessons.api.permissions checks
staff sessions only), so making one hands those actions on: `api_key_permissions_missing` says
which of them a curator lacks, and the admin refuses them the key. Commands are run by operators,
who have the database anyway, and make keys unchecked.
"""

import hashlib
import hmac
import secrets
from datetime import timedelta

from django.db import transaction
from django.utils import timezone

from lessons.api.permissions import MODELS
from lessons.models import ApiKey, Team

KEY_PREFIX = "msk_"
PREFIX_LENGTH = len(KEY_PREFIX) + 8
# Recording every request would turn each read into a write; a minute's precision is enough to
# tell a key in use from a forgotten one.
LAST_USED_PRECISION = timedelta(minutes=1)


def api_key_digest(raw_key: str) -> str:
    return hashlib.sha256(raw_key.encode("utf-8")).hexdigest()


def api_key_permissions() -> list[str]:
    """The Django permissions a key carries in effect: each action the API gates a staff session on
    (view, add, change, delete: the models' default permissions) on each kind it serves."""
    return [
        f"{model._meta.app_label}.{action}_{model._meta.model_name}"
        for model in MODELS.values() for action in model._meta.default_permissions
    ]


def api_key_permissions_missing(*, user) -> list[str]:
    """Those of `api_key_permissions()` that `user` lacks (none for a superuser): a curator who may
    not delete lessons must not be able to give themselves a key that does."""
    return [permission for permission in api_key_permissions() if not user.has_perm(permission)]


@transaction.atomic
def api_key_create(*, team: Team, name: str) -> tuple[ApiKey, str]:
    """Create a key for `team`; returns the row and the raw key, which exists only in this answer."""
    raw_key = f"{KEY_PREFIX}{secrets.token_hex(4)}_{secrets.token_urlsafe(32)}"
    api_key = ApiKey(team=team, name=name.strip(), prefix=raw_key[:PREFIX_LENGTH], key_hash=api_key_digest(raw_key))
    api_key.full_clean()
    api_key.save()
    return api_key, raw_key


def api_key_revoke(*, api_key: ApiKey) -> ApiKey:
    if api_key.revoked_at is None:
        api_key.revoked_at = timezone.now()
        api_key.save(update_fields=["revoked_at"])
    return api_key


def api_key_matches(*, api_key: ApiKey, raw_key: str) -> bool:
    """Whether `raw_key` is this key: its digest, compared in constant time (how long the check
    takes says nothing about how much of a guessed key was right)."""
    return hmac.compare_digest(api_key.key_hash, api_key_digest(raw_key))


def api_key_authenticate(*, raw_key: str) -> ApiKey | None:
    """The active key matching `raw_key` (with its team), or None; records when it was used."""
    # No key has a control character; a NUL would reach the prefix lookup, which PostgreSQL
    # refuses (a 422 blaming the query string), and a wrong key is the 401 whatever it holds.
    if not raw_key or not raw_key.startswith(KEY_PREFIX) or len(raw_key) > 200 or not raw_key.isprintable():
        return None
    # Looked up by its prefix (an index, not a secret), then the digests compared in constant time.
    # No order: every candidate is compared. The model's default order (team, name) made the planner
    # weigh an index that sorts against the prefix index, and on some statistics it took the former.
    candidates = ApiKey.objects.select_related("team").filter(
        prefix=raw_key[:PREFIX_LENGTH], revoked_at__isnull=True
    ).order_by()
    api_key = next((key for key in candidates if api_key_matches(api_key=key, raw_key=raw_key)), None)
    if api_key is None:
        return None
    now = timezone.now()
    if api_key.last_used_at is None or now - api_key.last_used_at >= LAST_USED_PRECISION:
        ApiKey.objects.filter(pk=api_key.pk).update(last_used_at=now)
        api_key.last_used_at = now
    return api_key
