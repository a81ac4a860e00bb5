"""Input and output serializers of the API (docs/behaviour.md §13 field names).

Input serializers check shapes and map each guard refusal
(:meth:`~memoryapp.rules.guard.MemoryGuard.refusals`) to the field it is about, so a
refusal is a field-level 400; the facade runs the guard again as the authority.
A refused value is never echoed: messages are fixed sentences.
"""

from __future__ import annotations

import datetime as dt
import json

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from memoryapp.api.patterns import (
    KEY_PATTERN,
    NAMESPACE_PATTERN,
    NON_BLANK_PATTERN,
    NORMALISABLE_PATTERN,
    TEXT_PATTERN,
    TITLE_PATTERN,
)
from memoryapp.conf import get_guard
from memoryapp.models import (
    Confidence,
    ErasureReceipt,
    Memory,
    MemoryEvent,
    MemoryType,
    ReviewItem,
    ReviewStatus,
    Scope,
    Sensitivity,
    SessionSummary,
    Source,
)
from memoryapp.recall.hybrid import RANKINGS
from memoryapp.rules import guard as guards
from memoryapp.rules import validation
from memoryapp.rules.errors import MemoryValidationError
from memoryapp.rules.validation import MAX_SUMMARY_CHARS, check_namespace, check_stored_key

NAMESPACE_MAX = 255  # the namespace / subject / session columns are varchar(255)
INT_MAX = 2**31 - 1  # the summary counters are 32-bit integer columns
MAX_MESSAGES = 1000
MAX_BLOCKS = 1000  # content blocks per message
MAX_MESSAGE_CHARS = 200_000  # text of one message, all its blocks together
MAX_TOP_K = 50
MAX_IDS = 1000

_KEY_SECRET = "key appears to contain sensitive credentials"
_WRITE_FIELDS = {"key": "key", "content": "value", "tags": "tags"}  # guard field -> input field


# DRF coerces JSON types (``1`` → ``"1"``, ``"true"`` → ``True``, ``"5"`` → ``5``); the
# API takes exactly the types its schema documents, so input fields are strict.
class StrictCharField(serializers.CharField):
    """A string field that takes only JSON strings.

    ``schema_pattern`` documents the rule its validation applies (patterns.py).
    """

    def __init__(self, *, schema_pattern: str | None = None, **kwargs) -> None:
        self.schema_pattern = schema_pattern  # a constructor argument: fields are deep-copied
        super().__init__(**kwargs)

    def to_internal_value(self, data):
        if not isinstance(data, str):
            self.fail("invalid")
        return super().to_internal_value(data)


class StrictIntegerField(serializers.IntegerField):
    """An integer field that takes only JSON integers (no strings, floats or booleans)."""

    def to_internal_value(self, data):
        if isinstance(data, bool) or not isinstance(data, int):
            self.fail("invalid")
        return super().to_internal_value(data)


class StrictBooleanField(serializers.BooleanField):
    """A boolean field that takes only ``true`` and ``false``."""

    def to_internal_value(self, data):
        if not isinstance(data, bool):
            self.fail("invalid")
        return data


class StrictChoiceField(serializers.ChoiceField):
    """A choice that takes only a JSON string among its choices; every ChoiceField of the API.

    DRF's own message quotes the refused value (``"password=hunter2…" is not a
    valid choice``), against docs/behaviour.md §13, and a value holding a lone
    surrogate then made the JSON renderer fail (an HTML 500). The refusal names the
    accepted choices instead; non-strings are refused rather than coerced.
    """

    default_error_messages = {
        "invalid_choice": "The value is not a valid choice; expected one of: {choices}."
    }

    def to_internal_value(self, data):
        if data == "" and self.allow_blank:
            return ""
        if not isinstance(data, str) or data not in self.choice_strings_to_values:
            self.fail("invalid_choice", choices=", ".join(self.choice_strings_to_values))
        return self.choice_strings_to_values[data]


_NAMED = {
    "project": "project namespace",
    "user": "user namespace",
    "session_id": "session id",
    "subject": "subject",
}


class NamespaceField(StrictCharField):
    """A namespace checked as every entry point checks it (:mod:`memoryapp.rules.validation`).

    A namespace that is written is held to ``check_namespace``; one that only
    names rows to find (erasure, purge, export: ``lookup=True``) to the looser
    ``check_stored_key``, so rows stored before the write rules stay reachable.
    """

    def __init__(self, *, lookup: bool = False, **kwargs):
        self.check = check_stored_key if lookup else check_namespace
        kwargs.setdefault("schema_pattern", None if lookup else NAMESPACE_PATTERN)
        super().__init__(**kwargs)

    def to_internal_value(self, data):
        value = super().to_internal_value(data)
        if self.max_length is not None and len(value) > self.max_length:
            return value  # DRF's own max_length message follows
        what = _NAMED.get(self.field_name, "Namespace")  # worded as the facade words it
        try:
            return self.check(value, what)
        except MemoryValidationError as exc:
            raise serializers.ValidationError(str(exc)) from None


def namespace_field(*, lookup: bool = False, **kwargs) -> serializers.CharField:
    """A namespace key: up to 255 characters, blank allowed, never stripped."""
    kwargs.setdefault("max_length", NAMESPACE_MAX)
    return NamespaceField(lookup=lookup, allow_blank=True, trim_whitespace=False, **kwargs)


class BoundInput(serializers.Serializer):
    """The namespaces a facade call is bound to (``MemoryManager(project, user)``)."""

    project = namespace_field(
        help_text="Project namespace ('' is the single-tenant namespace).",
    )
    user = namespace_field(
        required=False,
        allow_null=True,
        default=None,
        help_text="User namespace; omitted, null or '' means no user scope.",
    )

    def validate_user(self, value: str | None) -> str | None:
        return value or None


# ------------------------------------------------------------------ memories
class MemoryWriteSerializer(BoundInput):
    """``POST /api/memories/``: upsert one memory."""

    key = StrictCharField(
        trim_whitespace=False,
        help_text="The memory key; normalised into `key_normalized`.",
        schema_pattern=KEY_PATTERN,
    )
    value = StrictCharField(
        trim_whitespace=False,
        allow_blank=True,
        help_text=f"The content (1 to {guards.MAX_CONTENT_CHARS} characters once stripped).",
        schema_pattern=NON_BLANK_PATTERN,
    )
    tags = serializers.ListField(
        child=StrictCharField(
            trim_whitespace=False, allow_blank=True, max_length=validation.MAX_TAG_CHARS
        ),
        max_length=validation.MAX_TAGS,
        required=False,
        default=list,
    )
    scope = StrictChoiceField(
        choices=Scope.choices,
        required=False,
        allow_null=True,
        default=None,
        help_text="Explicit scope; inferred from the key and tags when omitted.",
    )
    type = StrictChoiceField(
        choices=MemoryType.choices,
        required=False,
        allow_null=True,
        default=None,
        help_text="Explicit type; inferred from the tags when omitted.",
    )

    def validate(self, attrs: dict) -> dict:
        """The guard's rules, each reported on its own field (docs/behaviour.md §2, §8)."""
        refused = get_guard().refusals(attrs["key"], attrs["value"], attrs["tags"])
        errors = {
            _WRITE_FIELDS[field]: [
                _KEY_SECRET
                if field == "key" and isinstance(exc, guards.SensitiveMemoryError)
                else str(exc)  # fixed sentences: a refused value is never echoed
            ]
            for field, exc in refused.items()
        }
        if errors:
            raise serializers.ValidationError(errors)
        return attrs


class MemorySerializer(serializers.ModelSerializer):
    """A memory as stored (docs/behaviour.md §13 field names)."""

    tags = serializers.ListField(child=serializers.CharField(), read_only=True)
    keywords = serializers.ListField(child=serializers.CharField(), read_only=True)

    class Meta:
        model = Memory
        fields: tuple[str, ...] = (
            "id",
            "namespace",
            "subject",
            "scope",
            "type",
            "key_normalized",
            "title",
            "content",
            "tags",
            "keywords",
            "source",
            "confidence",
            "sensitivity",
            "created_at",
            "updated_at",
            "deleted_at",
        )
        read_only_fields: tuple[str, ...] = fields


class MemoryWrittenSerializer(MemorySerializer):
    """``POST /api/memories/`` result: the memory, and what the client should know."""

    warnings = serializers.ListField(
        child=serializers.CharField(),
        read_only=True,
        help_text="E.g. the key was cut to 80 characters, or user scope fell back to project.",
    )

    class Meta(MemorySerializer.Meta):
        fields = (*MemorySerializer.Meta.fields, "warnings")
        read_only_fields = fields


# -------------------------------------------------------------- chat messages
_BLOCK_SCHEMA = {
    "type": "object",
    "properties": {
        "type": {"type": "string"},
        "text": {"type": "string", "pattern": TEXT_PATTERN},
    },
    "required": ["type"],
    "additionalProperties": True,
}


@extend_schema_field(
    {
        "oneOf": [
            {"type": "string", "pattern": TEXT_PATTERN, "maxLength": MAX_MESSAGE_CHARS},
            {"type": "array", "items": _BLOCK_SCHEMA, "maxItems": MAX_BLOCKS},
        ],
        "nullable": True,
        "description": "A string, or a list of content blocks (`text` blocks are read).",
    }
)
class MessageContentField(serializers.Field):
    """A chat message's ``content``: a string, a list of blocks, or null."""

    default_error_messages = {
        "invalid": "Expected a string, a list of content blocks, or null.",
        "block": "Each content block must be an object with a string `type`.",
        "text": "A block's `text` must be a string.",
        "too_many": f"At most {MAX_BLOCKS} content blocks.",
        "too_long": f"At most {MAX_MESSAGE_CHARS:,} characters of text per message.",
    }

    def __init__(self, **kwargs) -> None:
        kwargs.setdefault("allow_null", True)
        super().__init__(**kwargs)
        self._text = StrictCharField(allow_blank=True, trim_whitespace=False)

    def _clean_text(self, text):
        return self._text.run_validation(text)  # no NUL or lone surrogates reach the database

    def to_internal_value(self, data):
        if isinstance(data, str):
            if len(data) > MAX_MESSAGE_CHARS:
                self.fail("too_long")
            return self._clean_text(data)
        if not isinstance(data, list):
            self.fail("invalid")
        if len(data) > MAX_BLOCKS:
            self.fail("too_many")
        blocks = []
        for block in data:
            if not isinstance(block, dict) or not isinstance(block.get("type"), str):
                self.fail("block")
            block = dict(block)
            if "text" in block:
                if not isinstance(block["text"], str):
                    self.fail("text")
                block["text"] = self._clean_text(block["text"])
            blocks.append(block)
        if sum(len(b.get("text") or "") for b in blocks) > MAX_MESSAGE_CHARS:
            self.fail("too_long")
        return blocks

    def to_representation(self, value):
        return value


class MessageSerializer(serializers.Serializer):
    """One chat message (``{"role", "content"}``); other keys are ignored."""

    role = StrictCharField(max_length=64, trim_whitespace=False)
    content = MessageContentField(required=False, default=None)


def messages_field(**kwargs) -> serializers.ListField:
    """A list of chat messages, at most ``MAX_MESSAGES``."""
    return serializers.ListField(child=MessageSerializer(), max_length=MAX_MESSAGES, **kwargs)


# --------------------------------------------------------------------- recall
class RecallInputSerializer(BoundInput):
    """``POST /api/recall/``."""

    query = StrictCharField(allow_blank=True, trim_whitespace=False, max_length=10000)
    messages = messages_field(
        required=False, default=list, help_text="Recent messages (path hints)."
    )
    top_k = StrictIntegerField(required=False, default=5, min_value=1, max_value=MAX_TOP_K)
    session_id = namespace_field(
        lookup=True,
        required=False,
        allow_null=True,
        default=None,
        help_text="The current session: the stable block's session tail leaves it out.",
    )
    ranking = StrictChoiceField(
        choices=[(r, r) for r in RANKINGS],
        required=False,
        allow_null=True,
        default=None,
        help_text="agentao (Agentao's exact formula) or hybrid (BM25 fused with tags, path "
        "hints, recency, staleness); absent or null: the server's MEMORYAPP_RECALL_RANKING.",
    )


class RecallCandidateSerializer(serializers.Serializer):
    """A ``RecallCandidate`` (docs/behaviour.md §5)."""

    memory_id = serializers.CharField()
    scope = StrictChoiceField(choices=Scope.choices)
    type = StrictChoiceField(choices=MemoryType.choices)
    title = serializers.CharField()
    excerpt = serializers.CharField(allow_blank=True)
    score = serializers.FloatField()
    reasons = serializers.ListField(child=serializers.CharField())


class RecallOutputSerializer(serializers.Serializer):
    """``POST /api/recall/`` result (its schema; :func:`recall_output` writes the body)."""

    candidates = RecallCandidateSerializer(many=True)
    stable_block = serializers.CharField(allow_blank=True)
    context_block = serializers.CharField(allow_blank=True)


def recall_output(candidates, stable_block: str, context_block: str) -> dict:
    """What :class:`RecallOutputSerializer` would write, without building the serializer.

    Every API recall answers with this body. DRF deep-copies a serializer's declared
    fields for each instance (here eleven, nested) and converts values that are
    already what JSON needs; written out, the body costs ~1 ms less per request.
    tests/recall/test_recall_turn.py checks that both give the same body.
    """
    return {
        "candidates": [
            {
                "memory_id": c.memory_id,
                "scope": c.scope,
                "type": c.type,
                "title": c.title,
                "excerpt": c.excerpt,
                "score": float(c.score),
                "reasons": [str(r) for r in c.reasons],
            }
            for c in candidates
        ],
        "stable_block": stable_block,
        "context_block": context_block,
    }


# ------------------------------------------------------------ session summaries
class SessionSummaryWriteSerializer(BoundInput):
    """``POST /api/session-summaries/``."""

    session_id = StrictCharField(
        max_length=NAMESPACE_MAX,
        required=False,
        allow_null=True,
        default=None,
        help_text="The session; omitted or null: a new random id, as `MemoryManager` makes "
        "one up (the answer's `session_id` says which).",
    )
    summary = StrictCharField(
        max_length=MAX_SUMMARY_CHARS, help_text="The summary of one complete compaction."
    )

    def validate_summary(self, value: str) -> str:
        """Refuse a credential here, where the client can be told (the facade only logs)."""
        try:
            get_guard().detect_sensitive(value.strip())
        except guards.SensitiveMemoryError as exc:
            raise serializers.ValidationError(str(exc)) from None
        return value

    tokens_before = StrictIntegerField(required=False, default=0, min_value=0, max_value=INT_MAX)
    messages_summarized = StrictIntegerField(
        required=False, default=0, min_value=0, max_value=INT_MAX
    )


class SessionSummarySerializer(serializers.ModelSerializer):
    """A stored session summary."""

    class Meta:
        model = SessionSummary
        fields = (
            "id",
            "namespace",
            "subject",
            "session_id",
            "summary_text",
            "tokens_before",
            "messages_summarized",
            "created_at",
        )
        read_only_fields = fields


# ---------------------------------------------------------------- review queue
class CrystallizeInputSerializer(BoundInput):
    """``POST /api/crystallize/``."""

    session_id = namespace_field(lookup=True, required=False, allow_null=True, default=None)
    messages = messages_field(help_text="Chat messages; only `user` messages are read.")


class ReviewItemSerializer(serializers.ModelSerializer):
    """A crystallizer candidate in the review queue."""

    tags = serializers.ListField(child=serializers.CharField(), read_only=True)

    class Meta:
        model = ReviewItem
        fields = (
            "id",
            "namespace",
            "subject",
            "scope",
            "type",
            "key_normalized",
            "title",
            "content",
            "tags",
            "evidence",
            "source_session",
            "occurrences",
            "confidence",
            "status",
            "created_at",
            "updated_at",
        )
        read_only_fields = fields


class CrystallizeOutputSerializer(serializers.Serializer):
    """``POST /api/crystallize/`` result: the queued (or folded) review items."""

    items = ReviewItemSerializer(many=True)


class ApproveOutputSerializer(serializers.Serializer):
    """``POST /api/review-items/{id}/approve/`` result."""

    review_item = ReviewItemSerializer()
    memory = MemorySerializer()


class PurgeInputSerializer(serializers.Serializer):
    """``POST /api/review-items/purge/``: every filter is optional."""

    namespace = namespace_field(lookup=True, required=False, allow_null=True, default=None)
    status = StrictChoiceField(
        choices=ReviewStatus.values, required=False, allow_null=True, default=None
    )
    subject = namespace_field(lookup=True, required=False, allow_null=True, default=None)


class PurgeOutputSerializer(serializers.Serializer):
    """How many review items were erased, and the receipts of the erasures."""

    purged = serializers.IntegerField(min_value=0)
    receipts = serializers.ListField(
        child=serializers.CharField(), help_text="Receipt ids (one per namespace purged)."
    )


# ------------------------------------------------------------------- wipe
class WipeOutputSerializer(serializers.Serializer):
    """``WipeResult`` (docs/behaviour.md §3)."""

    memories_cleared = serializers.IntegerField(min_value=0)
    summaries_cleared = serializers.IntegerField(min_value=0)
    not_cleared = serializers.ListField(child=serializers.CharField())
    ok = serializers.BooleanField()


# ---------------------------------------------------------------- erasure
class ErasureInputSerializer(serializers.Serializer):
    """``POST /api/erasures/`` (``memoryapp.compliance.erase``).

    One target: a ``subject``, ``ids``, a ``namespace``, or ``everything``;
    ``namespace`` given with ``subject`` or ``ids`` restricts them to it.
    """

    subject = StrictCharField(
        max_length=NAMESPACE_MAX,
        trim_whitespace=False,
        required=False,
        allow_null=True,
        default=None,
        help_text="A user key: its user-scope memories, summaries and review items.",
        schema_pattern=NON_BLANK_PATTERN,
    )
    namespace = namespace_field(lookup=True, required=False, allow_null=True, default=None)
    ids = serializers.ListField(
        child=StrictCharField(max_length=64),
        required=False,
        allow_null=True,
        default=None,
        allow_empty=False,
        min_length=1,
        max_length=MAX_IDS,
        help_text="Memory, session summary or review item ids.",
    )
    everything = StrictBooleanField(required=False, default=False)
    include_authored = StrictBooleanField(
        required=False,
        default=False,
        help_text="With `subject`: also erase the project-scope memories it authored.",
    )
    dry_run = StrictBooleanField(
        required=False,
        default=False,
        help_text="Erase nothing: answer 200 with what would go (ErasurePreview).",
    )

    def validate_subject(self, value: str | None) -> str | None:
        if value is not None and not value.strip():
            raise serializers.ValidationError("A subject is a non-empty user key.")
        return value

    def validate(self, attrs: dict) -> dict:
        given = [k for k in ("subject", "namespace", "ids") if attrs.get(k) is not None]
        if attrs["everything"] and given:
            raise serializers.ValidationError(
                {"everything": ["`everything` cannot be combined with another target."]}
            )
        if not attrs["everything"] and not given:
            raise serializers.ValidationError(
                {"non_field_errors": ["Give a subject, a namespace, ids, or everything=true."]}
            )
        if attrs.get("subject") is not None and attrs.get("ids") is not None:
            raise serializers.ValidationError({"ids": ["Give either `subject` or `ids`."]})
        if attrs["include_authored"] and attrs.get("subject") is None:
            raise serializers.ValidationError(
                {"include_authored": ["`include_authored` applies to a subject erasure."]}
            )
        if attrs.get("ids") is not None:
            attrs["ids"] = sorted(set(attrs["ids"]))
        return attrs


class ErasurePreviewSerializer(serializers.Serializer):
    """``POST /api/erasures/`` with ``dry_run``: what the erasure would remove."""

    dry_run = serializers.BooleanField()
    counts = serializers.DictField(child=serializers.IntegerField(min_value=0))
    project_memories_authored = serializers.IntegerField(
        allow_null=True,
        help_text="Subject erasures: project-scope memories the subject wrote (else null).",
    )
    authored_erased = serializers.BooleanField(
        help_text="Whether those go too (`include_authored`); otherwise they are kept."
    )


class ReceiptSerializer(serializers.ModelSerializer):
    """An erasure receipt (docs/behaviour.md §9): who, when, what, counts, purge, verification.

    It never holds erased text: the subject and namespace appear only as keyed HMACs.
    """

    counts = serializers.DictField(child=serializers.IntegerField(), help_text="Rows per table.")
    erased_ids = serializers.DictField(
        child=serializers.ListField(child=serializers.CharField()),
        help_text="The erased row ids per table (possibly truncated; see details).",
    )
    databases = serializers.ListField(child=serializers.CharField())
    purged = serializers.BooleanField(help_text="Whether the vendor purge completed.")

    class Meta:
        model = ErasureReceipt
        fields = (
            "id",
            "actor",
            "target_kind",
            "subject_hmac",
            "namespace_hmac",
            "key_id",
            "include_authored",
            "criteria",
            "counts",
            "erased_ids",
            "authored",
            "databases",
            "state",
            "purge_method",
            "purge_status",
            "purged",
            "vacuumed",
            "verified",
            "verification",
            "caveats",
            "details",
            "attempts",
            "created_at",
            "updated_at",
            "purged_at",
        )
        read_only_fields = fields


# ------------------------------------------------------------------- export
class ExportQuerySerializer(serializers.Serializer):
    """``GET /api/exports/``: a ``subject``, a ``namespace``, or both (its rows there).

    Its schema is :data:`memoryapp.api.erasures.EXPORT_TARGET_PARAMETER`: one object of
    query parameters that names at least one of the two, and nothing else. A parameter
    of another name is refused before this runs, as on every operation
    (:mod:`memoryapp.api.query_params`): a misspelt ``namespace`` must not widen the
    export of a subject to every namespace.
    """

    subject = StrictCharField(
        max_length=NAMESPACE_MAX,
        trim_whitespace=False,
        required=False,
        default=None,
        schema_pattern=NON_BLANK_PATTERN,
    )
    namespace = namespace_field(lookup=True, required=False, default=None)

    def validate_subject(self, value: str | None) -> str | None:
        if value is not None and not value.strip():
            raise serializers.ValidationError("A subject is a non-empty user key.")
        return value

    def validate(self, attrs: dict) -> dict:
        # A query string's "?subject=" reaches the field as "not given" (DRF's reading
        # of blank HTML input); the schema says a subject is never empty, so say so.
        if getattr(self.initial_data, "get", lambda _k: None)("subject") == "":
            raise serializers.ValidationError({"subject": ["A subject is a non-empty user key."]})
        if attrs.get("subject") is None and attrs.get("namespace") is None:
            raise serializers.ValidationError(
                {"non_field_errors": ["Give `subject`, `namespace`, or both."]}
            )
        return attrs


# ------------------------------------------------------------------- events
@extend_schema_field(OpenApiTypes.ANY)
class EventDetailField(serializers.Field):
    """The event's ``detail`` column: parsed JSON when it is JSON, else the text, or null."""

    def to_representation(self, value):
        if value is None:
            return None
        try:
            return json.loads(value)
        except (TypeError, ValueError):
            return value


class MemoryEventSerializer(serializers.ModelSerializer):
    """One audit event: ids, type, time, actor — never content."""

    detail = EventDetailField(read_only=True, allow_null=True)

    class Meta:
        model = MemoryEvent
        fields = ("id", "memory_id", "namespace", "event_type", "timestamp", "actor", "detail")
        read_only_fields = fields


# ------------------------------------------------------------ store problems
class StoreProblemsQuerySerializer(BoundInput):
    """``GET /api/store-problems/``: the manager to probe."""

    project = namespace_field(required=False, default="", help_text="Project namespace.")


class StoreProblemsSerializer(serializers.Serializer):
    """``take_store_problems()`` after probing the prompt-path reads."""

    problems = serializers.ListField(child=serializers.CharField())


# ------------------------------------------------- Agentao's store protocol
# The endpoints behind ``memoryapp.clients.store.HttpMemoryStore``: Agentao's
# ``MemoryStore`` methods on one namespace, with the records Agentao's manager
# builds. Agentao's manager runs its guard first; the server runs its own again
# (docs/behaviour.md §8), so nothing reaches the tables unchecked.
MAX_RECORD_ID = 32  # the id columns
MAX_KEYWORDS = 100
MAX_STAMP_CHARS = 64


def _choice(choices, default, **kwargs) -> serializers.ChoiceField:
    return StrictChoiceField(choices=choices, required=False, default=default, **kwargs)


def _text_list(max_items: int, **kwargs) -> serializers.ListField:
    return serializers.ListField(
        child=StrictCharField(max_length=validation.MAX_TAG_CHARS, trim_whitespace=False),
        max_length=max_items,
        required=False,
        default=list,
        **kwargs,
    )


class StoreInput(serializers.Serializer):
    """The namespace a store call acts on (one ``HttpMemoryStore`` per namespace)."""

    namespace = namespace_field(help_text="The store's namespace ('' = single-tenant).")


class StoreRecordInput(StoreInput):
    """What Agentao's ``upsert_memory`` and ``upsert_review_item`` share."""

    subject = namespace_field(
        required=False,
        allow_null=True,
        default=None,
        help_text="Provenance: the user key in whose session the row was written.",
    )
    id = StrictCharField(
        max_length=MAX_RECORD_ID,
        required=False,
        allow_blank=True,
        default="",
        help_text="The id Agentao's manager chose ('' = the server picks one).",
    )
    scope = StrictChoiceField(choices=Scope.choices)
    type = StrictChoiceField(choices=MemoryType.choices)
    key_normalized = StrictCharField(
        max_length=validation.MAX_KEY_CHARS,
        trim_whitespace=False,
        help_text="The key, stored normalised (docs/behaviour.md §2); Agentao sends it so.",
        schema_pattern=NORMALISABLE_PATTERN,
    )
    title = StrictCharField(
        max_length=validation.MAX_TITLE_CHARS, trim_whitespace=False, schema_pattern=TITLE_PATTERN
    )
    content = StrictCharField(trim_whitespace=False, schema_pattern=NON_BLANK_PATTERN)
    tags = _text_list(validation.MAX_TAGS)
    created_at = StrictCharField(
        max_length=MAX_STAMP_CHARS,
        required=False,
        allow_blank=True,
        default="",
        help_text="ISO 8601 (naive = UTC); '' or an unreadable stamp means now.",
    )

    def validate_created_at(self, value: str) -> str:
        """A readable stamp within the years 2–9998 (an unreadable one means now)."""
        try:
            stamp = dt.datetime.fromisoformat(value.strip())
        except ValueError:
            return value
        try:
            validation.check_stamp(stamp)
        except MemoryValidationError as exc:
            raise serializers.ValidationError(str(exc)) from None
        return value

    def validate_key_normalized(self, value: str) -> str:
        try:
            return validation.normalize_key(value)
        except MemoryValidationError as exc:
            raise serializers.ValidationError(str(exc)) from None

    def validate_title(self, value: str) -> str:
        try:
            title = get_guard().validate_title(value)
        except MemoryValidationError as exc:
            raise serializers.ValidationError(str(exc)) from None
        if not title:
            raise serializers.ValidationError("Memory title is empty.")
        return value

    def validate_content(self, value: str) -> str:
        try:
            get_guard().validate_content(value)
        except MemoryValidationError as exc:
            raise serializers.ValidationError(str(exc)) from None
        return value

    def texts(self, attrs: dict) -> dict[str, list[str]]:
        """The stored texts of a record, by field, for the credential scan."""
        return {
            "key_normalized": [attrs["key_normalized"]],
            "title": [attrs["title"]],
            "content": [attrs["content"]],
            "tags": list(attrs["tags"]),
        }

    def validate(self, attrs: dict) -> dict:
        """The guard's credential scan on every stored text (a refusal never echoes it)."""
        guard = get_guard()
        errors: dict[str, list[str]] = {}
        for name, texts in self.texts(attrs).items():
            try:
                for text in texts:
                    guard.detect_sensitive(text)
            except guards.SensitiveMemoryError as exc:
                errors[name] = [str(exc)]
        if errors:
            raise serializers.ValidationError(errors)
        return attrs


class MemoryRecordInput(StoreRecordInput):
    """``POST /api/memories/records/``: Agentao's ``upsert_memory(record)``."""

    keywords = _text_list(MAX_KEYWORDS)
    # A declared field (the serializer's metaclass moves it out of the class), not
    # the Field.source attribute the stub sees.
    source = _choice(Source.choices, Source.EXPLICIT)  # type: ignore[assignment]
    confidence = _choice(Confidence.choices, Confidence.EXPLICIT_USER)
    sensitivity = _choice(Sensitivity.choices, Sensitivity.NORMAL)

    def texts(self, attrs: dict) -> dict[str, list[str]]:
        return {**super().texts(attrs), "keywords": list(attrs["keywords"])}


class ReviewRecordInput(StoreRecordInput):
    """``POST /api/review-items/records/``: Agentao's ``upsert_review_item(item)``."""

    evidence = StrictCharField(
        max_length=validation.MAX_CONTENT_CHARS,
        trim_whitespace=False,
        allow_blank=True,
        required=False,
        default="",
    )
    source_session = StrictCharField(
        max_length=NAMESPACE_MAX,
        trim_whitespace=False,
        allow_blank=True,
        required=False,
        default="",
    )
    occurrences = StrictIntegerField(required=False, default=1, min_value=0, max_value=INT_MAX)
    confidence = _choice(Confidence.choices, Confidence.AUTO_SUMMARY)
    status = _choice(ReviewStatus.choices, ReviewStatus.PENDING)

    def texts(self, attrs: dict) -> dict[str, list[str]]:
        return {**super().texts(attrs), "evidence": [attrs["evidence"]]}


class ChangeVersionQuery(StoreInput):
    """``GET /api/memories/change-version/``: omitted means the single-tenant namespace."""

    namespace = namespace_field(required=False, default="", help_text="The store's namespace.")


class ClearMemoriesInput(StoreInput):
    """``POST /api/memories/clear/``: Agentao's ``clear_memories(scope)``."""

    scope = StrictChoiceField(
        choices=Scope.choices,
        required=False,
        allow_null=True,
        default=None,
        help_text="Only this scope; omitted or null: every scope.",
    )


class ClearSummariesInput(StoreInput):
    """``POST /api/session-summaries/clear/``: Agentao's ``clear_session_summaries``."""

    session_id = StrictCharField(
        max_length=NAMESPACE_MAX,
        trim_whitespace=False,
        required=False,
        allow_null=True,
        default=None,
        help_text="Only this session's summaries; omitted or null: every session's.",
    )


class ClearedSerializer(serializers.Serializer):
    """How many rows a clear removed (memories: soft-deleted; summaries: deleted)."""

    cleared = serializers.IntegerField(min_value=0)


class ChangeVersionSerializer(serializers.Serializer):
    """A namespace's change fingerprint (compare for equality only)."""

    version = serializers.IntegerField(
        min_value=0, help_text="Changes whenever a memory of the namespace changes, by anyone."
    )


class ReviewEditInput(serializers.Serializer):
    """``PATCH /api/review-items/{id}/``: a reviewer's corrections (give at least one field).

    The service validates the text through the guard (docs/behaviour.md §6).
    """

    title = StrictCharField(required=False, trim_whitespace=False, schema_pattern=TITLE_PATTERN)
    content = StrictCharField(
        required=False,
        trim_whitespace=False,
        max_length=guards.MAX_CONTENT_CHARS,
        schema_pattern=NON_BLANK_PATTERN,
    )
    type = StrictChoiceField(choices=MemoryType.choices, required=False)
    scope = StrictChoiceField(choices=Scope.choices, required=False)

    def validate(self, attrs):
        unknown = sorted(set(self.initial_data) - set(self.fields))
        if unknown:
            raise serializers.ValidationError({unknown[0]: ["Unknown field."]})
        if not attrs:
            raise serializers.ValidationError("Give at least one of title, content, type, scope.")
        return attrs


class ReviewStatusInput(serializers.Serializer):
    """``POST /api/review-items/{id}/status/``: Agentao's ``update_review_status``."""

    status = StrictChoiceField(choices=ReviewStatus.choices)


# ------------------------------------------------------------------- errors
class ErrorSerializer(serializers.Serializer):
    """Every non-validation error body."""

    detail = serializers.CharField()
