"""The write-time guard of memories (validation, secret refusal, classification).

The rules live in their own modules — :mod:`memoryapp.rules.validation`,
:mod:`memoryapp.rules.secret_scan`, :mod:`memoryapp.rules.classify` and the errors in
:mod:`memoryapp.rules.errors`; this module keeps :class:`MemoryGuard`, the hook hosts
subclass (``MEMORYAPP_GUARD``), which applies them in order.
"""

from __future__ import annotations

from memoryapp import metrics
from memoryapp.rules import secret_scan
from memoryapp.rules.errors import MemoryValidationError, SensitiveMemoryError, about
from memoryapp.rules.validation import (
    check_content,
    check_title,
    clean_tags,
    normalize_key,
    require_str,
)

__all__ = ["MemoryGuard"]


# --- The guard ---------------------------------------------------------------------


class MemoryGuard:
    """The write-time checks every memory goes through (docs/behaviour.md §8).

    Hosts subclass and override :meth:`detect_sensitive` to refuse more (or less);
    the ``MEMORYAPP_GUARD`` setting names the class to use.
    """

    def validate_title(self, key: str) -> str:
        """Derive the title from the key as given.

        Args:
            key: The key as given by the caller.

        Returns:
            The key stripped, cut to its first 120 characters (possibly empty: an
            empty key is refused by :func:`normalize_key`).

        Raises:
            MemoryValidationError: ``key`` is not a string, or contains a line break
                (``\\n``, ``\\r`` or any other boundary ``str.splitlines`` honours),
                anywhere, even at an end.
        """
        return check_title(key)

    def validate_content(self, content: str) -> str:
        """Validate and strip the content; it is never truncated.

        Args:
            content: The memory's text.

        Returns:
            The content stripped.

        Raises:
            MemoryValidationError: Not a string, empty after stripping, or longer than
                4000 characters after stripping.
        """
        return check_content(content)

    def detect_sensitive(self, content: str) -> None:
        """Refuse text that looks like a credential (the families of :data:`SECRET_PATTERNS`).

        It does not look for personal data (card numbers, national ids).

        Args:
            content: The text to scan.

        Raises:
            SensitiveMemoryError: A credential was found; the message never includes it.
            MemoryValidationError: ``content`` is not a string.
        """
        family = secret_scan.find_secret_family(require_str(content, "Memory content"))
        if family is not None:
            metrics.guard_refusal(family)
            raise SensitiveMemoryError()

    def check(self, key: str, content: str) -> tuple[str, str, str]:
        """Run every check of a write, in docs/behaviour.md §8 order.

        ``validate_title``, :func:`normalize_key`, ``validate_content``, then
        ``detect_sensitive`` on the content and on the key: a title is stored and
        rendered into prompts just like the content, so a credential pasted into the
        key is refused too.

        Args:
            key: The key as given by the caller.
            content: The memory's text as given.

        Returns:
            ``(key_normalized, title, content)`` with the content stripped.

        Raises:
            MemoryValidationError: Bad key or content (``field`` says which).
            SensitiveMemoryError: The content or the key contains a credential
                (``field`` says which).
        """
        with about("key"):
            title = self.validate_title(key)
            key_normalized = normalize_key(key)
        with about("content"):
            text = self.validate_content(content)
            self.detect_sensitive(text)
        with about("key"):
            self.detect_sensitive(key.strip())
        return key_normalized, title, text

    def refusals(self, key: str, content: str, tags) -> dict[str, ValueError]:
        """The checks of a write, per field, without stopping at the first refusal.

        What an interface shows beside each field (the API's field-level 400): the
        checks of :meth:`check` on the key and on the content, and the credential
        scan of each tag (:func:`memoryapp.writes.store.prepare` runs it). Each refusal
        names its input in ``field`` as :meth:`check`'s do (:mod:`memoryapp.rules.errors`
        says why both exist); the answer is keyed by the check, which is that name
        unless a host's raiser named another input.

        Args:
            key: The key as given by the caller.
            content: The memory's text as given.
            tags: The tags as given.

        Returns:
            ``"key"``, ``"content"`` and ``"tags"`` (those refused, in that order) to
            the refusal: a :class:`MemoryValidationError` or :class:`SensitiveMemoryError`.
        """
        found: dict[str, ValueError] = {}
        try:
            with about("key"):
                self.validate_title(key)
                normalize_key(key)
                self.detect_sensitive(key.strip())
        except (SensitiveMemoryError, MemoryValidationError) as exc:
            found["key"] = exc
        try:
            with about("content"):
                self.detect_sensitive(self.validate_content(content))
        except (SensitiveMemoryError, MemoryValidationError) as exc:
            found["content"] = exc
        try:
            with about("tags"):
                for tag in clean_tags(tags):
                    self.detect_sensitive(tag)
        except (SensitiveMemoryError, MemoryValidationError) as exc:
            found["tags"] = exc
        return found
