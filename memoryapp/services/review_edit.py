"""Correct a pending review item before it is approved (docs/behaviour.md §6).

A reviewer fixes what the crystallizer got wrong — the title, the content, the type
or the scope — through the guard every write passes, and the edit is audited (a
``review_edit`` event naming the fields changed and the actor, never their text).
Approval then promotes the corrected content (:func:`memoryapp.services.review.approve`
reads the item as it is). Only a pending item can be edited. The title and content of
a project-scope item are shared with its pending siblings (the same key proposed by
other people, decided together), so whichever is approved carries the correction.
"""

from __future__ import annotations

from collections.abc import Mapping

from django.db import DEFAULT_DB_ALIAS, transaction

from memoryapp.conf import get_guard
from memoryapp.fields import now
from memoryapp.models import MemoryType, ReviewItem, Scope
from memoryapp.rules import validation
from memoryapp.rules.errors import MemoryValidationError, about
from memoryapp.rules.guard import MemoryGuard
from memoryapp.services import review_contributors as contributors
from memoryapp.writes import review_queue, store

__all__ = ["EDITABLE", "ReviewEditConflict", "clean", "collides", "edit", "retyped_key"]

EDITABLE = ("title", "content", "type", "scope")
"""The fields a reviewer may correct."""


class ReviewEditConflict(MemoryValidationError):
    """The edit would make the item collide with another pending item (same scope and key)."""


def clean(changes: Mapping[str, object], guard: MemoryGuard | None = None) -> dict:
    """Validate the corrections (no database access): the cleaned values by field.

    Raises:
        MemoryValidationError: an unknown field, an unknown type or scope, a title
            or content that is empty, too long or has a line break (title); its
            ``field`` names the input.
        SensitiveMemoryError: the title or the content looks like a credential.
    """
    guard = guard or get_guard()
    unknown = sorted(set(changes) - set(EDITABLE))
    if unknown:
        raise MemoryValidationError(f"Only {', '.join(EDITABLE)} can be edited", field=unknown[0])
    cleaned: dict[str, str] = {}
    if "title" in changes:
        with about("title"):
            title = guard.validate_title(validation.require_str(changes["title"], "Title"))
            if not title:
                raise MemoryValidationError("Title must not be empty")
            guard.detect_sensitive(title)
        cleaned["title"] = title
    if "content" in changes:
        with about("content"):
            content = guard.validate_content(validation.require_str(changes["content"], "Content"))
            guard.detect_sensitive(content)
        cleaned["content"] = content
    for name, choices in (("type", MemoryType.values), ("scope", Scope.values)):
        if name in changes:
            value = changes[name]
            if value not in choices:
                raise MemoryValidationError(
                    f"Unknown {name}: expected one of {', '.join(choices)}", field=name
                )
            cleaned[name] = str(value)
    return cleaned


def retyped_key(key: str, old_type: str, new_type: str) -> str:
    """``key`` with its type prefix renamed (``constraint_x`` → ``decision_x``)."""
    return new_type + key[len(old_type) :] if key.startswith(old_type + "_") else key


def collides(
    item: ReviewItem, cleaned: Mapping[str, str], *, using: str = DEFAULT_DB_ALIAS
) -> bool:
    """Whether the corrections would give ``item`` the scope and key of another pending item
    of its subject (items fold per subject: another subject's item of that key is no clash)."""
    new_type = cleaned.get("type", item.type)
    scope = cleaned.get("scope", item.scope)
    key = retyped_key(item.key_normalized, item.type, new_type)
    if (scope, key) == (item.scope, item.key_normalized):
        return False
    rows = (
        ReviewItem.objects.using(using)
        .pending()
        .filter(namespace=item.namespace, scope=scope, key_normalized=key)
        .exclude(pk=item.pk)
    )
    return review_queue.same_subject(rows, item.subject).exists()


def edit(
    *,
    item_id: str,
    namespace: str,
    changes: Mapping[str, object],
    guard: MemoryGuard | None = None,
    using: str = DEFAULT_DB_ALIAS,
    actor: str = "",
) -> ReviewItem | None:
    """Correct a pending item of ``namespace``; the item, or None when it is not pending there.

    A new type renames the key's type prefix (``constraint_x`` → ``decision_x``) and
    the tags (``[type]``), so the item folds and approves as what it now is. Logs a
    ``review_edit`` event with the fields changed and ``actor`` in the same
    transaction; an edit that changes nothing writes nothing.

    Raises:
        MemoryValidationError: invalid corrections (see :func:`clean`).
        ReviewEditConflict: another pending item already has the new scope and key.
        SensitiveMemoryError: the title or the content looks like a credential.
    """
    cleaned = clean(changes, guard)
    with transaction.atomic(using=using):
        # As approval does: an erasure of the namespace or of a subject whose item the
        # edit writes runs wholly before the edit (nothing left to edit) or wholly after.
        covered = contributors.lock_for_decision(using, namespace, [item_id])
        locked = contributors.locked_rows(using, namespace, [item_id], covered)
        item = next((r for r in locked if r.pk == item_id), None)
        if item is None:
            return None
        changed = [
            name for name in EDITABLE if name in cleaned and getattr(item, name) != cleaned[name]
        ]
        if not changed:
            return item
        if collides(item, cleaned, using=using):
            raise ReviewEditConflict(
                "Another pending item has this scope and key: approve or reject it first",
                field="scope" if "scope" in changed else "type",
            )
        old_type = item.type
        for name in changed:
            setattr(item, name, cleaned[name])
        if item.type != old_type:
            item.key_normalized = retyped_key(item.key_normalized, old_type, item.type)
            if list(item.tags) == [old_type]:
                item.tags = [item.type]
        item.updated_at = now()
        item.save(using=using)
        _log_edit(using, item, namespace, actor, changed)
        if "type" not in changed and "scope" not in changed:
            # A project key's items are one proposal from several people, decided
            # together: its corrected words are theirs too, whichever of them is approved.
            _share_words(using, item, contributors.decide_siblings([item], locked), changed, actor)
        return item


def _share_words(using: str, item: ReviewItem, siblings, changed: list[str], actor: str) -> None:
    """Give the pending project-scope ``siblings`` the title and content just corrected."""
    words = [name for name in ("title", "content") if name in changed]
    for sibling in siblings if words else ():
        for name in words:
            setattr(sibling, name, getattr(item, name))
        sibling.updated_at = item.updated_at
        sibling.save(using=using, update_fields=[*words, "updated_at"])
        _log_edit(using, sibling, item.namespace, actor, words)


def _log_edit(using: str, item: ReviewItem, namespace: str, actor: str, changed) -> None:
    store.log_event(
        using,
        item.pk,
        "review_edit",
        namespace=namespace,
        actor=actor,
        fields=",".join(changed),
    )
