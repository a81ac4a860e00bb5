"""Model fields whose stored form other writers of the same database rely on."""

from __future__ import annotations

import datetime as dt

from django.db import models
from django.utils import timezone

from memoryapp.db.vendor import known


class IsoDateTimeField(models.DateTimeField):
    """A ``DateTimeField`` stored on SQLite as ``YYYY-MM-DDTHH:MM:SS.ffffff`` (UTC).

    Django's SQLite adapter writes ``str(datetime)`` — a space separator, and no
    fraction when the microseconds are zero. The reference runtime (Agentao)
    writes ISO text with a ``T`` into the same columns and orders by them as
    text, so mixing both forms would break ``ORDER BY created_at`` on a shared
    file. Every value, including lookup parameters, goes through here, so the
    stored text sorts in time order whoever wrote it. Other vendors keep their
    native timestamp type.
    """

    def get_db_prep_value(self, value, connection, prepared=False):
        value = super().get_db_prep_value(value, connection, prepared)
        if (
            (vendor := known(connection)) is not None
            and vendor.text_timestamps
            and isinstance(value, str)
            and len(value) >= 19
        ):
            # Django's adapter produced "YYYY-MM-DD HH:MM:SS[.ffffff]" (naive UTC).
            if len(value) == 19:
                value += ".000000"
            value = value[:10] + "T" + value[11:]
        return value


def now() -> dt.datetime:
    """The current time, timezone-aware (UTC)."""
    return timezone.now()
