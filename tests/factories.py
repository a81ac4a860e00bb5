"""Rows a unit test builds directly, without the facade or the desk's service.

A test of a page, a list or a scope rule needs a staff user in the Compliance group, a
desk grant, a memory row or a subject request to exist; pushing them through
``MemoryManager`` or ``open_request`` would test those again and hide what the test is
about. Plain functions (no factory library): each fills the columns a test does not care
about with a harmless default and takes the ones it does as keywords.
"""

from __future__ import annotations

from collections.abc import Iterable

from django.contrib.auth.models import Group, Permission

from memoryapp.api.testing import TokenClient, token_client
from memoryapp.compliance import desk
from memoryapp.models import DeskGrant, ErasureReceipt, Memory, SubjectRequest
from memoryapp.permissions import COMPLIANCE_GROUP
from tests._admin_support import make_staff


def grant_desk(user, *tenants: str) -> None:
    """Give ``user`` a desk grant for each of ``tenants`` (an exact tenant or a prefix)."""
    for namespace in tenants:
        DeskGrant.objects.create(user=user, namespace=namespace)


def join_compliance(user) -> None:
    """Put ``user`` in the Compliance group (the role the migrations create)."""
    user.groups.add(Group.objects.get(name=COMPLIANCE_GROUP))


def make_officer(username: str, *tenants: str, perms: Iterable[str] = ()):
    """A staff user in the Compliance group, holding ``perms`` too, whose desk handles
    ``tenants`` only (none: every tenant)."""
    user = make_staff(username, perms)
    join_compliance(user)
    grant_desk(user, *tenants)
    return user


def make_staff_api(
    username: str,
    perms: Iterable[str] = (),
    *,
    grants: tuple[str, ...] = ("acme/",),
    compliance: bool = False,
    tenants: tuple[str, ...] = (),
) -> TokenClient:
    """An API token client whose user is staff: holding the ``memoryapp`` permission
    codenames ``perms``, in the Compliance group if ``compliance``, with desk grants for
    ``tenants``. ``grants`` are the client's API namespace grants (staff do not need them)."""
    client = token_client(username, list(grants))
    user = client.user
    user.is_staff = True
    user.save()
    if compliance:
        join_compliance(user)
    user.user_permissions.add(
        *Permission.objects.filter(content_type__app_label="memoryapp", codename__in=list(perms))
    )
    grant_desk(user, *tenants)
    return client


def memory_row(namespace: str, **fields) -> Memory:
    """A memory row written as a raw writer would (no guard, no event, no index)."""
    values = {"scope": "user", "key_normalized": "k", "content": "c", **fields}
    return Memory.objects.create(namespace=namespace, **values)


def subject_request_row(**fields) -> SubjectRequest:
    """A subject request row as stored, without intake: an access request received today,
    due in a month, its subject key an HMAC of zeros (no key is sealed in it)."""
    received_on = fields.pop("received_on", desk.today())
    values = {
        "right": "access",
        "due_on": desk.due_date(received_on),
        "subject_hmac": "0" * 64,
        **fields,
    }
    return SubjectRequest.objects.create(received_on=received_on, **values)


def receipt_row(**fields) -> ErasureReceipt:
    """An erasure receipt row as stored, without an erasure: by namespace unless told."""
    return ErasureReceipt.objects.create(**{"target_kind": "namespace", **fields})
