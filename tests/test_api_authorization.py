"""Authorization has one source: the codename registry, and rules the API enforces closed."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from django.contrib.auth.models import Permission

from memoryapp import permissions as perms
from memoryapp.api import permissions as api_permissions

ROOT = Path(__file__).resolve().parents[1]
REGISTRY = ROOT / "memoryapp" / "permissions.py"
# A permission codename of memoryapp, qualified or bare, as a string literal.
_VERBS = "view|add|change|delete|erase|wipe|export|purge"
_MODELS = "memory|sessionsummary|reviewitem|memoryevent|erasurereceipt|schemameta"
SPELLED = re.compile(rf"[\"'](?:memoryapp\.)?(?:{_VERBS})_(?:{_MODELS})[\"']")


@pytest.mark.django_db
def test_every_registered_codename_is_a_permission_django_knows():
    known = {
        f"{app}.{code}"
        for app, code in Permission.objects.values_list("content_type__app_label", "codename")
    }
    assert set(perms.ALL) <= known
    rules = [v for v in vars(api_permissions).values() if isinstance(v, api_permissions.Rule)]
    assert len(rules) >= 15
    for rule in rules:
        assert set(rule.perms) | set(rule.see) <= set(perms.ALL), rule


def test_codenames_are_spelled_only_in_the_registry():
    offenders = []
    for path in (ROOT / "memoryapp").rglob("*.py"):
        if path == REGISTRY or "migrations" in path.parts:
            continue
        text = path.read_text(encoding="utf-8")
        offenders += [f"{path.relative_to(ROOT)}: {m.group(0)}" for m in SPELLED.finditer(text)]
    assert offenders == []
