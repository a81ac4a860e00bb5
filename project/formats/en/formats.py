"""English date formats of the back office: ``2025-12-03 14:32:05`` everywhere.

Django 5 always localises, so ``DATETIME_FORMAT`` in settings is overridden by
the locale's own (``Dec. 3, 2025, 2:32 p.m.``); a format module is the one
place that sets it for Django's pages (lists, read-only fields, History) and
the app's (``memoryapp.admin.labels.admin_time``) alike. Times are in
``TIME_ZONE`` (UTC). Input formats stay Django's.
"""

DATETIME_FORMAT = "Y-m-d H:i:s"
SHORT_DATETIME_FORMAT = DATETIME_FORMAT
DATE_FORMAT = "Y-m-d"
SHORT_DATE_FORMAT = DATE_FORMAT
TIME_FORMAT = "H:i:s"
