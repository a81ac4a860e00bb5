"""The body of every non-validation error."""

from __future__ import annotations

from rest_framework import serializers


class ErrorSerializer(serializers.Serializer):
    """Every non-validation error body."""

    detail = serializers.CharField()
