"""The API's exception handler: facade refusals and oversized bodies become JSON 4xx bodies."""

from __future__ import annotations

from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from rest_framework import status
from rest_framework.exceptions import APIException, ValidationError
from rest_framework.views import exception_handler as drf_exception_handler

from memoryapp.compliance import ErasureRequestError
from memoryapp.rules.errors import MemoryValidationError, SensitiveMemoryError
from memoryapp.rules.wording import byte_size


class PayloadTooLarge(APIException):
    """413: the body is larger than ``DATA_UPLOAD_MAX_MEMORY_SIZE``."""

    status_code = status.HTTP_413_REQUEST_ENTITY_TOO_LARGE
    default_detail = "Request body too large."
    default_code = "payload_too_large"


class Conflict(APIException):
    """409: the resource is not in a state that allows the action."""

    status_code = status.HTTP_409_CONFLICT
    default_detail = "Conflict."
    default_code = "conflict"


class Unprocessable(APIException):
    """422: a well-formed request that cannot be honoured (e.g. a reused Idempotency-Key)."""

    status_code = status.HTTP_422_UNPROCESSABLE_ENTITY
    default_detail = "Unprocessable request."
    default_code = "unprocessable"


def exception_handler(exc, context):
    """DRF's handler, after mapping the facade's and erasure's ``ValueError`` refusals to 400.

    A ``SensitiveMemoryError`` message is a fixed sentence: nothing refused is echoed.
    """
    if isinstance(exc, RequestDataTooBig):
        limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
        exc = PayloadTooLarge(f"Request body too large: the limit is {byte_size(limit)}.")
    elif isinstance(exc, SensitiveMemoryError | MemoryValidationError | ErasureRequestError):
        exc = ValidationError({"non_field_errors": [str(exc)]})
    return drf_exception_handler(exc, context)
