"""gunicorn settings used by ``make serve`` (scripts/serve.sh); the command line sets the rest."""

import os

accesslog = "-"  # request lines on stdout: method, path, status — never a body
# Query values, headers and the Referer's query are left out of the access log (they
# hold subjects and searched text); JSON lines with LOG_FORMAT=json.
logger_class = "project.gunicorn_logging.AccessLogger"
graceful_timeout = 30
timeout = 120  # an erasure in the request (MEMORYAPP_ERASURE_WORKER off) may take a while
# gunicorn >= 25.1 opens a control socket for `gunicornc` at one path per user
# ($XDG_RUNTIME_DIR/gunicorn.ctl or ~/.gunicorn/gunicorn.ctl): a second server of the same
# user (another checkout, a benchmark, a test) would take it over from the first. Off,
# unless GUNICORN_CONTROL_SOCKET names this instance's own path. (Older gunicorns ignore both.)
_control_socket = os.environ.get("GUNICORN_CONTROL_SOCKET", "")
control_socket_disable = not _control_socket
if _control_socket:
    control_socket = _control_socket


def child_exit(server, worker):
    """A worker's metrics files stop counting as live when it exits (multiprocess mode)."""
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        from prometheus_client import multiprocess

        multiprocess.mark_process_dead(worker.pid)
