"""Token authentication that reads the user's namespace grants in the same statement.

Every API request needs both the token's user and the user's grants
(:class:`memoryapp.api.permissions.Access`). DRF's ``TokenAuthentication`` reads the
first, and the grants took a second query; here one statement reads both, the grants
as a JSON array from a correlated subquery. That is one round trip less per request
on the hot paths (bench/TENANTS.md, HTTP cold phase), for the same answer: the grants
are read once per request, at its start, as before.

Tokens are stored as SHA-256 digests (:class:`~memoryapp.api.models.ApiToken`): the
clear token a client sends is hashed and looked up by its digest, so the database
never holds a usable token. The statement also reads the token's ``last_used_at``;
only when that is older than :data:`~memoryapp.api.models.LAST_USED_RESOLUTION` does
a second, conditional statement refresh it — at most once a minute per token, so the
common request stays one statement.
"""

from __future__ import annotations

import datetime as dt
import hmac
import json

from django.db import connections
from django.db.models import Q
from django.db.models.expressions import RawSQL
from django.utils import timezone
from django.utils.dateparse import parse_datetime
from django.utils.translation import gettext_lazy as _
from rest_framework import authentication, exceptions

from memoryapp.api.models import LAST_USED_RESOLUTION, ApiToken, NamespaceGrant, digest_of
from memoryapp.db import vendor

__all__ = ["TokenAuthentication", "PREFETCHED_GRANTS"]

WRONG_SCHEME = (
    "This API takes `Authorization: Token <key>`; the header names another scheme "
    "(e.g. Bearer or Basic)."
)

PREFETCHED_GRANTS = "_memoryapp_grants"
"""The attribute of an authenticated user that holds its grants (a list), when read here."""

_COLUMNS = ("id", "namespace", "can_read", "can_write", "can_erase", "created_at")
_ATTNAMES = ("id", "user_id", "namespace", "can_read", "can_write", "can_erase", "created_at")
_ORDER = ("namespace", "id")  # the model's ordering (user, namespace), then a tie-break


def _grants_sql(connection, token_table: str) -> str | None:
    """The user's grants as one JSON text (:attr:`Vendor.json_rows`), a subquery of the
    token's statement; None on a vendor memoryapp does not support."""
    facts = vendor.known(connection)
    if facts is None:
        return None
    quote = connection.ops.quote_name
    rows = (
        f"SELECT {', '.join(quote(c) for c in _COLUMNS)}"
        f" FROM {quote(NamespaceGrant._meta.db_table)}"
        f" WHERE {quote('user_id')} = {quote(token_table)}.{quote('user_id')}"
        f" ORDER BY {', '.join(quote(c) for c in _ORDER)}"
    )
    return facts.json_rows.format(
        rows=rows,
        columns=", ".join(f"g.{quote(c)}" for c in _COLUMNS),
        order=", ".join(f"g.{quote(c)}" for c in _ORDER),
    )


def _grant(user, row: list) -> NamespaceGrant:
    """One ``_COLUMNS`` row of the JSON as the model instance a query would have given."""
    pk, namespace, can_read, can_write, can_erase, created = row
    created_at = parse_datetime(created)
    if created_at is None:
        raise ValueError(f"grant {pk}: not a timestamp: {created!r}")
    if timezone.is_naive(created_at):
        created_at = created_at.replace(tzinfo=dt.UTC)  # SQLite keeps UTC without an offset
    values = [pk, user.pk, namespace, bool(can_read), bool(can_write), bool(can_erase)]
    grant = NamespaceGrant.from_db(user._state.db, [*_ATTNAMES], [*values, created_at])
    NamespaceGrant.user.field.set_cached_value(grant, user)
    return grant


def _touch(token: ApiToken) -> bool:
    """Record that ``token`` was used now, unless that was recorded lately; True if written.

    The update is conditional, so concurrent requests that all read a stale
    ``last_used_at`` write it once (the others match no row).
    """
    now = timezone.now()
    last = token.last_used_at
    if last is not None and now - last < LAST_USED_RESOLUTION:
        return False
    stale = Q(last_used_at__isnull=True) | Q(last_used_at__lt=now - LAST_USED_RESOLUTION)
    written = ApiToken._default_manager.filter(stale, pk=token.pk).update(last_used_at=now)
    token.last_used_at = now
    return written > 0


class TokenAuthentication(authentication.TokenAuthentication):
    """DRF's ``Authorization: Token <key>`` over hashed tokens; the user arrives with
    its grants read.

    Same answers and errors as DRF's class. On a vendor without the JSON functions
    used here the grants are left to :class:`~memoryapp.api.permissions.Access`'s
    own query.
    """

    model = ApiToken

    def authenticate(self, request):
        """DRF's reading of ``Authorization``, refusing another scheme by name.

        DRF's class ignores ``Authorization: Bearer …`` and the request then fails with
        "credentials were not provided", which sends a client looking for a missing
        header; the answer says which scheme this API takes instead.
        """
        words = authentication.get_authorization_header(request).split()
        if words and words[0].lower() != self.keyword.lower().encode():
            raise exceptions.AuthenticationFailed(WRONG_SCHEME)
        return super().authenticate(request)

    def authenticate_credentials(self, key):
        model = self.get_model()
        tokens = model._default_manager.select_related("user")
        sql = _grants_sql(connections[tokens.db], model._meta.db_table)
        if sql is not None:
            tokens = tokens.annotate(_grants_json=RawSQL(sql, ()))
        digest = digest_of(key)
        try:
            token = tokens.get(digest=digest)
        except model.DoesNotExist:
            token = None
        # The row is found by its digest (an index lookup, whose timing tells an
        # attacker nothing about a token they do not know); the constant-time
        # comparison keeps the check itself free of timing differences.
        if token is None or not hmac.compare_digest(token.digest, digest):
            raise exceptions.AuthenticationFailed(_("Invalid token."))
        user = token.user
        if not user.is_active:
            raise exceptions.AuthenticationFailed(_("User inactive or deleted."))
        _touch(token)
        if sql is not None:
            rows = json.loads(token._grants_json or "[]")
            setattr(user, PREFETCHED_GRANTS, [_grant(user, row) for row in rows])
        return (user, token)
