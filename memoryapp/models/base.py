"""Ids, the choices of the tables' columns and the JSON list columns shared by the models."""

from __future__ import annotations

import json
import secrets

from django.db import models


def new_id() -> str:
    """A short random hex id (16 hex digits: collisions stay negligible at millions of rows)."""
    return secrets.token_hex(8)


class Scope(models.TextChoices):
    """Which store a memory belongs to."""

    USER = "user", "user"
    PROJECT = "project", "project"


class MemoryType(models.TextChoices):
    """What kind of fact a memory is (docs/behaviour.md §2)."""

    PREFERENCE = "preference", "preference"
    PROFILE = "profile", "profile"
    PROJECT_FACT = "project_fact", "project fact"
    WORKFLOW = "workflow", "workflow"
    DECISION = "decision", "decision"
    CONSTRAINT = "constraint", "constraint"
    NOTE = "note", "note"


class Source(models.TextChoices):
    """Who wrote a memory."""

    EXPLICIT = "explicit", "explicit"
    CRYSTALLIZED = "crystallized", "crystallized"
    AUTO = "auto", "auto"


class Confidence(models.TextChoices):
    """How much a memory is trusted."""

    EXPLICIT_USER = "explicit_user", "explicit (user)"
    INFERRED = "inferred", "inferred"
    AUTO_SUMMARY = "auto_summary", "auto summary"


class Sensitivity(models.TextChoices):
    """Sensitivity label of a memory."""

    NORMAL = "normal", "normal"
    SENSITIVE = "sensitive", "sensitive"
    BLOCKED = "blocked", "blocked"


class ReviewStatus(models.TextChoices):
    """State of a crystallizer candidate."""

    PENDING = "pending", "pending"
    APPROVED = "approved", "approved"
    REJECTED = "rejected", "rejected"


def json_list(text: str | None) -> list[str]:
    """The list stored in a ``*_json`` column ([] for anything unreadable)."""
    try:
        value = json.loads(text or "[]")
    except (TypeError, ValueError):
        return []
    return [str(v) for v in value] if isinstance(value, list) else []


def dump_list(values) -> str:
    """A list as stored in a ``*_json`` column."""
    # ensure_ascii=False keeps CJK tags searchable as text in the column itself.
    return json.dumps(list(values or ()), ensure_ascii=False)


class _TagsMixin:
    """``tags`` as a list over the ``tags_json`` text column (Agentao's storage form)."""

    @property
    def tags(self) -> list[str]:
        return json_list(self.tags_json)

    @tags.setter
    def tags(self, values) -> None:
        self.tags_json = dump_list(values)
