"""``POST /api/recall/``: its input, and its output schema and body."""

from __future__ import annotations

from rest_framework import serializers

from memoryapp.api.serializers.fields import (
    BoundInput,
    StrictCharField,
    StrictChoiceField,
    StrictIntegerField,
    namespace_field,
)
from memoryapp.api.serializers.messages import messages_field
from memoryapp.conf import served_rankings
from memoryapp.models import MemoryType, Scope

MAX_TOP_K = 50


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
        choices=[("agentao", "agentao"), ("hybrid", "hybrid")],  # set per instance below
        required=False,
        allow_null=True,
        default=None,
        help_text="agentao (Agentao's exact formula), hybrid (BM25 fused with tags, path "
        "hints, recency, staleness) or, where the server has an embedder, semantic (hybrid "
        "fused with embedding similarity); absent or null: the server's "
        "MEMORYAPP_RECALL_RANKING.",
    )

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        # The rankings this server serves: the schema lists semantic only where it is.
        self.fields["ranking"].choices = [(r, r) for r in served_rankings()]


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
