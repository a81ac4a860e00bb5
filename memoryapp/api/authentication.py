"""Token authentication that reads the user's namespace grants in the same statement.

Every API request needs both the token's user and the user's grants
(:class:`memoryapp.api.permissions.Access`). DRF's ``TokenAuthentication`` reads the
first, and the grants took a second query; here one statement reads both, the grants
as a JSON array from a correlated subquery. That is one round trip less per request
on the hot paths (bench/TENANTS.md, HTTP cold phase), for the same answer: the grants
are read once per request, at its start, as before.
"""

from __future__ import annotations

import datetime as dt
import json

from django.db import connections
from django.db.models.expressions import RawSQL
from django.utils import timezone
from django.utils.dateparse import parse_datetime
from django.utils.translation import gettext_lazy as _
from rest_framework import authentication, exceptions

from .models import NamespaceGrant

__all__ = ["TokenAuthentication", "PREFETCHED_GRANTS"]

PREFETCHED_GRANTS = "_memoryapp_grants"
"""The attribute of an authenticated user that holds its grants (a list), when read here."""

_COLUMNS = ("id", "namespace", "can_read", "can_write", "can_erase", "created_at")

# Per vendor: the user's grants as one JSON text (an array of arrays, ``_COLUMNS`` each;
# "[]" without a grant), in the model's order. ``{grants}``: the grants table,
# ``{outer}``: the token's.
_GRANTS_JSON = {
    "postgresql": (
        "SELECT COALESCE(json_agg(json_build_array({columns})"
        " ORDER BY g.namespace, g.id), '[]')::text"
        " FROM {grants} g WHERE g.user_id = {outer}.user_id"
    ),
    "sqlite": (
        "SELECT json_group_array(json_array({columns}))"
        " FROM (SELECT * FROM {grants} WHERE user_id = {outer}.user_id ORDER BY namespace, id) g"
    ),
}


def _grants_sql(vendor: str, token_table: str, quote) -> str | None:
    template = _GRANTS_JSON.get(vendor)
    if template is None:
        return None
    return template.format(
        columns=", ".join(f"g.{quote(c)}" for c in _COLUMNS),
        grants=quote(NamespaceGrant._meta.db_table),
        outer=quote(token_table),
    )


def _grant(user, row: list) -> NamespaceGrant:
    pk, namespace, can_read, can_write, can_erase, created = row
    created_at = parse_datetime(created)
    if created_at is None:
        raise ValueError(f"grant {pk}: not a timestamp: {created!r}")
    if timezone.is_naive(created_at):
        created_at = created_at.replace(tzinfo=dt.UTC)  # SQLite keeps UTC without an offset
    grant = NamespaceGrant(
        id=pk,
        user_id=user.pk,
        namespace=namespace,
        can_read=bool(can_read),
        can_write=bool(can_write),
        can_erase=bool(can_erase),
        created_at=created_at,
    )
    grant._state.adding = False
    grant._state.db = user._state.db
    NamespaceGrant.user.field.set_cached_value(grant, user)
    return grant


class TokenAuthentication(authentication.TokenAuthentication):
    """DRF's ``Authorization: Token <key>``; the user arrives with its grants read.

    Same answers and errors as DRF's class. On a vendor without the JSON functions
    used here the grants are left to :class:`~memoryapp.api.permissions.Access`'s
    own query.
    """

    def authenticate_credentials(self, key):
        model = self.get_model()
        tokens = model._default_manager.select_related("user")
        conn = connections[tokens.db]
        sql = _grants_sql(conn.vendor, model._meta.db_table, conn.ops.quote_name)
        if sql is not None:
            tokens = tokens.annotate(_grants_json=RawSQL(sql, ()))
        try:
            token = tokens.get(key=key)
        except model.DoesNotExist:
            raise exceptions.AuthenticationFailed(_("Invalid token.")) from None
        user = token.user
        if not user.is_active:
            raise exceptions.AuthenticationFailed(_("User inactive or deleted."))
        if sql is not None:
            rows = json.loads(token._grants_json or "[]")
            setattr(user, PREFETCHED_GRANTS, [_grant(user, row) for row in rows])
        return (user, token)
