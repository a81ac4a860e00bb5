"""gunicorn's access log without query values, as JSON lines when ``LOG_FORMAT=json``.

gunicorn's default access line holds the request line with its query string and
the ``Referer`` (``?subject=acme%2Ferin``, ``?q=<searched text>``): values an
erasure cannot reach once they are in a log file (docs/compliance.md §10).
:class:`AccessLogger` keeps each parameter's name and replaces its value with
``…`` (``memoryapp.ops.logs.redact_uri``), leaves out the request and response
headers and the environment (an ``Authorization`` header is a credential), and
writes one JSON object per line when ``LOG_FORMAT=json``. gunicorn's error log
gets the same filter as Django's request loggers.
"""

from __future__ import annotations

import json
import os

from gunicorn import glogging

from memoryapp.ops.logs import REDACTED_VALUE, WithoutValues, redact_query_string, redact_uri


class AccessLogger(glogging.Logger):
    """gunicorn's ``Logger`` whose access atoms hold no query value, header or environ.

    Its error log (``Error handling request /path?q=…`` and the traceback after it)
    passes ``memoryapp.ops.logs.WithoutValues`` as well.
    """

    def setup(self, cfg) -> None:
        """gunicorn's set-up, then the value filter on the error log."""
        super().setup(cfg)
        if not any(isinstance(f, WithoutValues) for f in self.error_log.filters):
            self.error_log.addFilter(WithoutValues())

    def atoms(self, resp, req, environ, request_time) -> dict:
        """The access-log atoms: the URL-bearing ones redacted, headers and environ left out."""
        atoms = super().atoms(resp, req, environ, request_time)
        atoms = {k: v for k, v in atoms.items() if not k.endswith(("}i", "}o", "}e"))}
        raw_uri = environ.get("RAW_URI") or environ.get("PATH_INFO") or ""
        atoms["r"] = (
            f"{environ.get('REQUEST_METHOD')} {redact_uri(raw_uri)} "
            f"{environ.get('SERVER_PROTOCOL')}"
        )
        atoms["q"] = redact_query_string(environ.get("QUERY_STRING") or "")
        referer = environ.get("HTTP_REFERER")
        atoms["f"] = redact_uri(referer) if referer else "-"
        if atoms.get("u") not in (None, "-"):
            atoms["u"] = REDACTED_VALUE  # a Basic-auth login name
        return atoms

    def access(self, resp, req, environ, request_time) -> None:
        """One access line: gunicorn's format, or a JSON object with ``LOG_FORMAT=json``."""
        if os.environ.get("LOG_FORMAT", "text") != "json":
            return super().access(resp, req, environ, request_time)
        if not self.access_log_enabled:
            return None
        atoms = self.atoms(resp, req, environ, request_time)
        line = {
            "time": atoms["t"].strip("[]"),
            "name": "gunicorn.access",
            "remote_addr": atoms["h"],
            "method": atoms["m"],
            "path": redact_uri(environ.get("RAW_URI") or environ.get("PATH_INFO") or ""),
            "protocol": atoms["H"],
            "status": atoms["s"],
            "bytes": atoms["B"],
            "duration_ms": atoms["M"],
            "referer": atoms["f"],
            "user_agent": atoms["a"],
        }
        try:
            self.access_log.info("%s", json.dumps(line, ensure_ascii=False, default=str))
        except Exception:
            self.exception("access log line not written")
        return None
