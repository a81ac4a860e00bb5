"""gunicorn settings used by ``make serve`` (scripts/serve.sh); the command line sets the rest."""

accesslog = "-"  # request lines on stdout: method, path, status — never a body
# Query values, headers and the Referer's query are left out of the access log (they
# hold subjects and searched text); JSON lines with LOG_FORMAT=json.
logger_class = "project.gunicorn_logging.AccessLogger"
graceful_timeout = 30
timeout = 120  # an erasure in the request (MEMORYAPP_ERASURE_WORKER off) may take a while


def child_exit(server, worker):
    """A worker's metrics files stop counting as live when it exits (multiprocess mode)."""
    import os

    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        from prometheus_client import multiprocess

        multiprocess.mark_process_dead(worker.pid)
