"""The one request parser of the API: JSON, with hostile-input failures turned into 400s."""

from __future__ import annotations

from rest_framework.exceptions import ParseError
from rest_framework.parsers import JSONParser as _DRFJSONParser


class JSONParser(_DRFJSONParser):
    """DRF's strict JSON parser; a body nested too deeply for the decoder is a 400, not a 500.

    The size limit is Django's ``DATA_UPLOAD_MAX_MEMORY_SIZE`` (DRF reads the body
    through ``request.body``); the exception handler turns it into a 413.
    """

    def parse(self, stream, media_type=None, parser_context=None):
        try:
            return super().parse(stream, media_type, parser_context)
        except RecursionError:
            raise ParseError("JSON parse error - the document is nested too deeply.") from None
