"""Chat messages as the recall and the crystallizer take them."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from memoryapp.api.patterns import TEXT_PATTERN
from memoryapp.api.serializers.fields import StrictCharField

MAX_MESSAGES = 1000
MAX_BLOCKS = 1000  # content blocks per message
MAX_MESSAGE_CHARS = 200_000  # text of one message, all its blocks together

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
