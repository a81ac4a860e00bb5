"""Provisioning of API clients: a non-staff user, its namespace grants and its tokens."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from django.contrib.auth import get_user_model
from django.contrib.auth.base_user import AbstractBaseUser
from django.db import transaction

from memoryapp.api.models import ApiToken, NamespaceGrant

NAMESPACE_MAX = 255


class ClientError(ValueError):
    """A client cannot be provisioned as asked; ``str(error)`` says why."""


@dataclass(frozen=True)
class ProvisionedClient:
    """The outcome of :func:`provision_client`.

    ``token`` is the clear token when one was issued (a new client, a client
    without a token, or ``rotate``), to be shown once: only its digest is stored.
    It is None when the client keeps its existing tokens, which cannot be shown again.
    """

    user: AbstractBaseUser
    token: str | None
    created: bool
    grants: tuple[NamespaceGrant, ...]
    removed: tuple[str, ...]


def provision_client(
    name: str,
    namespaces: Iterable[str],
    *,
    write: bool = False,
    erase: bool = False,
    rotate: bool = False,
) -> ProvisionedClient:
    """Create or update the non-staff API user ``name`` with exactly these grants.

    Every namespace (an exact key, or a prefix ending in ``/``) is granted read,
    plus write and erase when asked; grants not listed are removed. A client's
    tokens are kept across updates (so deployed clients keep working) unless
    ``rotate``, which revokes them all and issues a new one.

    Raises:
        ClientError: an empty name or namespace list, an over-long namespace, or
            ``name`` belongs to a staff or superuser account.
    """
    name = (name or "").strip()
    if not name:
        raise ClientError("The client name is empty.")
    wanted = list(dict.fromkeys(namespaces))
    if not wanted:
        raise ClientError("Give at least one --grant NAMESPACE (or PREFIX/).")
    for ns in wanted:
        if len(ns) > NAMESPACE_MAX or "\x00" in ns:
            raise ClientError(f"Not a namespace: {ns[:40]!r}…")
    User = get_user_model()
    with transaction.atomic():
        user = User.objects.filter(**{User.USERNAME_FIELD: name}).first()
        created = user is None
        if user is None:
            user = User(**{User.USERNAME_FIELD: name}, is_staff=False, is_superuser=False)
            user.set_unusable_password()  # a token-only client: no admin or password login
            user.save()
        elif user.is_staff or user.is_superuser:
            raise ClientError(f"{name!r} is a staff account; API clients are non-staff users.")
        stale = NamespaceGrant.objects.filter(user=user).exclude(namespace__in=wanted)
        removed = tuple(stale.values_list("namespace", flat=True))
        stale.delete()
        grants = []
        for ns in wanted:
            grant, _ = NamespaceGrant.objects.update_or_create(
                user=user,
                namespace=ns,
                defaults={"can_read": True, "can_write": write, "can_erase": erase},
            )
            grants.append(grant)
        if rotate:
            ApiToken.objects.filter(user=user).delete()
        key = None
        if not ApiToken.objects.filter(user=user).exists():
            _token, key = ApiToken.issue(user)
    return ProvisionedClient(user, key, created, tuple(grants), removed)
