"""Approval takes namespace, scope and subject from the review item, on every path.

Before, ``memory review --approve ID --project acme/web`` (no ``--user``) turned
acme/bob's preference into a project memory with no subject, which
``erase(subject="acme/bob")`` then left behind; the admin and the API also gave a
project-scope item's memory different subjects.
"""

from __future__ import annotations

import pytest
from django.core.management import call_command

from memoryapp import MemoryManager
from memoryapp.api.testing import token_client
from memoryapp.compliance import erase
from memoryapp.models import Memory, ReviewItem
from tests._admin_support import REVIEW, act, client_for, make_staff

pytestmark = pytest.mark.django_db

BOB = "acme/bob"
MESSAGES = [
    {"role": "user", "content": "I prefer dark mode in every editor."},
    {"role": "user", "content": "We decided to use Postgres for the ledger."},
]


def _queue() -> dict[str, ReviewItem]:
    items = MemoryManager(project="acme/web", user=BOB).crystallize_user_messages(MESSAGES)
    return {item.scope: item for item in items}


def _approve_cli(item):
    call_command("memory", "review", "--approve", item.pk, "--project", "acme/web")


def _approve_api(item):
    client = token_client("acme-app", ["acme/"], write=True)
    r = client.post(f"/api/review-items/{item.pk}/approve/")
    assert r.status_code == 200, r.content


def _approve_admin(item):
    admin = client_for(make_staff(f"root-{item.pk}", superuser=True))
    act(admin, REVIEW, "approve_selected", [item.pk], confirm=True)


def _approve_python_unbound(item):
    MemoryManager(project="acme/web").approve_review_item(item.pk)


PATHS = {
    "cli": _approve_cli,
    "api": _approve_api,
    "admin": _approve_admin,
    "python": _approve_python_unbound,
}


@pytest.mark.parametrize("path", sorted(PATHS))
def test_every_path_approves_into_the_items_subject(path):
    items = _queue()
    assert set(items) == {"user", "project"}
    for item in items.values():
        PATHS[path](item)
    assert ReviewItem.objects.filter(status="approved").count() == 2
    user_memory = Memory.objects.get(scope="user")
    project_memory = Memory.objects.get(scope="project")
    assert (user_memory.namespace, user_memory.subject) == (BOB, BOB)
    assert (project_memory.namespace, project_memory.subject) == ("acme/web", BOB)


@pytest.mark.parametrize("path", sorted(PATHS))
def test_the_subjects_erasure_takes_the_approved_preference(path):
    PATHS[path](_queue()["user"])
    erase(subject=BOB)
    assert not Memory.objects.filter(content__icontains="dark mode").exists()
