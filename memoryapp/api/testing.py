"""Helpers for tests that call the API (this project's and a host's): token clients."""

from __future__ import annotations

from collections.abc import Iterable

from django.contrib.auth.base_user import AbstractBaseUser
from rest_framework.test import APIClient

from memoryapp.api.grants import provision_client
from memoryapp.api.models import ApiToken
from memoryapp.api.throttles import SCOPES, MemoryScopedThrottle


class TokenClient(APIClient):
    """An ``APIClient`` that knows the token and the user it authenticates as."""

    token: str
    user: AbstractBaseUser


def token_client(
    name: str, grants: Iterable[str], *, write: bool = False, erase: bool = False
) -> TokenClient:
    """An ``APIClient`` authenticated as a (new or updated) non-staff client with ``grants``.

    The client's token is available as ``client.token`` (a client that existed
    already gets one more token, since stored tokens cannot be read back). It starts
    with an empty throttle history: test databases reuse user ids, the throttle cache
    outlives them.
    """
    provisioned = provision_client(name, grants, write=write, erase=erase)
    token = provisioned.token
    if token is None:
        _row, token = ApiToken.issue(provisioned.user)
    for scope in SCOPES:
        key = MemoryScopedThrottle.cache_format % {"scope": scope, "ident": provisioned.user.pk}
        MemoryScopedThrottle.cache.delete(key)
    client = TokenClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {token}")
    client.token = token
    client.user = provisioned.user
    return client
