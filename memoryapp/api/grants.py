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


@dataclass(frozen=True)
class StaffToken:
    """The outcome of :func:`staff_token`: the clear token when one was issued (shown once),
    and the prefixes of the user's tokens after the call."""

    user: AbstractBaseUser
    token: str | None
    prefixes: tuple[str, ...]
    revoked: int


def staff_token(username: str, *, rotate: bool = False, revoke: bool = False) -> StaffToken:
    """A token for an existing, active staff account (the compliance officer, an operator).

    Such a token carries no namespace grants: the API gives a staff user what their
    model permissions allow (``Access.is_global``), as the admin does, so the desk's
    endpoints (``/api/subject-requests/``, lookups, exports) answer them as they would in
    the admin. A user who has a token keeps it unless ``rotate`` (revoke every token,
    issue a new one); ``revoke`` removes every token and issues none.

    Raises:
        ClientError: no such user, an inactive one, or one that is not staff (a
            non-staff account is an API client: :func:`provision_client`).
    """
    User = get_user_model()
    user = User.objects.filter(**{User.USERNAME_FIELD: (username or "").strip()}).first()
    if user is None:
        raise ClientError(f"No user {username!r}: create the staff account first (admin).")
    if not user.is_active:
        raise ClientError(f"{username!r} is inactive: no token is issued for it.")
    if not (user.is_staff or user.is_superuser):
        raise ClientError(
            f"{username!r} is not a staff account; a non-staff API client gets its token "
            "with `memory client NAME --grant NAMESPACE`."
        )
    with transaction.atomic():
        revoked = 0
        if rotate or revoke:
            revoked, _ = ApiToken.objects.filter(user=user).delete()
        key = None
        if not revoke and not ApiToken.objects.filter(user=user).exists():
            _token, key = ApiToken.issue(user)
        prefixes = tuple(ApiToken.objects.filter(user=user).values_list("prefix", flat=True))
    return StaffToken(user, key, prefixes, revoked)
