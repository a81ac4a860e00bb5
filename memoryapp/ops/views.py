"""Operations endpoints: ``/healthz`` for load balancers, ``/livez`` for process supervisors,
``/metrics`` for Prometheus.

``/healthz`` needs no authentication and shows no data: only whether each
check passed and, when one failed, a reason without any row's content. The
reason's detail — a driver's message, which names the database host, port and
role — is shown only to staff (a session) and to the metrics token's holder, and
written to the server log; anyone else sees the check's fixed wording. Likewise
the erasure counts behind a ``"degraded"`` status: anyone else sees the status only.
``/metrics`` is off unless ``MEMORYAPP_METRICS_TOKEN`` is set; it then answers
only a request carrying ``Authorization: Bearer <token>``.
"""

from __future__ import annotations

import hmac
import logging

from django.conf import settings
from django.db import DEFAULT_DB_ALIAS, DatabaseError, connections, router
from django.db.migrations.executor import MigrationExecutor
from django.http import Http404, HttpResponse, JsonResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET

from memoryapp import metrics
from memoryapp.models import ErasureReceipt, Memory, ReviewItem, SessionSummary
from memoryapp.ops import collectors

_TABLES = (Memory, SessionSummary, ReviewItem, ErasureReceipt)
logger = logging.getLogger(__name__)
# A reason is "<fixed wording>: <detail from the exception>"; the detail is private.
_DETAIL = ": "


def _first_line(exc: BaseException) -> str:
    lines = str(exc).strip().splitlines()
    return (lines[0] if lines else type(exc).__name__)[:200]


def _database(alias: str) -> str | None:
    try:
        with connections[alias].cursor() as cursor:
            cursor.execute("SELECT 1")
            cursor.fetchone()
    except DatabaseError as exc:
        return f"unreachable: {_first_line(exc)}"
    return None


def _migrations(alias: str) -> str | None:
    try:
        executor = MigrationExecutor(connections[alias])
        plan = executor.migration_plan(executor.loader.graph.leaf_nodes())
    except DatabaseError as exc:
        return f"cannot read the migration history: {_first_line(exc)}"
    if plan:
        return f"{len(plan)} migration(s) not applied; run 'manage.py migrate'"
    return None


def _store(alias: str) -> str | None:
    """Each memory table answers a one-row read (a corrupt file or a lost table does not)."""
    for model in _TABLES:
        if not router.allow_migrate_model(alias, model):
            continue
        try:
            list(model.objects.using(alias).order_by().values_list("pk", flat=True)[:1])
        except DatabaseError as exc:
            return f"{model._meta.db_table} unreadable: {_first_line(exc)}"
    return None


def health_checks() -> dict[str, str | None]:
    """Check name → None when it passed, else the reason it failed."""
    aliases = [a for a in settings.DATABASES if a == DEFAULT_DB_ALIAS or _is_real(a)]
    results: dict[str, str | None] = {}
    for alias in aliases:
        problem = _database(alias)
        results[f"database:{alias}"] = problem
        if problem is None:
            results[f"migrations:{alias}"] = _migrations(alias)
            results[f"store:{alias}"] = _store(alias)
    return results


def _is_real(alias: str) -> bool:
    """Databases worth checking: not the in-memory one behind ephemeral managers."""
    name = str(settings.DATABASES[alias].get("NAME") or "")
    return "mode=memory" not in name and name != ":memory:"


def erasure_health() -> dict | None:
    """Unfinished erasures a person must look at, as counts (None when they cannot be read).

    Not a failure of this process: ``/healthz`` stays 200 and says ``degraded``, so
    a load balancer keeps a healthy worker while a person is told.
    """
    from memoryapp import conf
    from memoryapp.compliance import attention, copies, outcome_counts

    try:
        found = attention.status()
        outcomes = outcome_counts.counts()
        late = copies.late_by_server()
    except DatabaseError:
        return None  # the database checks already say why
    return {
        "needs_attention": found.needs_attention,
        "stale": found.stale,
        "stale_after_seconds": int(found.stale_after),
        "pending": found.pending,
        # What the receipts' verifications proved, by outcome (a byte scan, or none possible).
        "outcomes": outcomes,
        # Servers that have not reported their check of an erasure in time (per server).
        "copies_late": late,
        "copy_report_after_seconds": int(conf.copy_report_after()),
    }


def public_reason(reason: str) -> str:
    """A failed check's reason without its detail (the part after ``": "``)."""
    return reason.partition(_DETAIL)[0]


def _metrics_token_given(request) -> bool:
    token = getattr(settings, "MEMORYAPP_METRICS_TOKEN", None)
    given = request.headers.get("Authorization", "")
    return bool(token) and hmac.compare_digest(given.encode(), f"Bearer {token}".encode())


def _may_see_details(request) -> bool:
    """Staff (a session) and the metrics token's holder see why a check failed."""
    user = getattr(request, "user", None)
    staff = bool(user is not None and user.is_authenticated and user.is_staff)
    return staff or _metrics_token_given(request)


@never_cache
@require_GET
def healthz(request) -> JsonResponse:
    """Readiness: 200 ``{"status": "ok"}`` when every check passes, else 503 with the failed ones.

    200 ``"degraded"`` when the checks pass but erasures need a person. The counts
    (``erasures``: how many need attention, how many are unfinished past
    ``MEMORYAPP_ERASURE_STALE_AFTER``, how many are pending, and ``outcomes``: the
    receipts per verification outcome) are shown only to staff
    and the metrics token, like a failure's detail (host, port, role in a connection
    error), which also goes to the server log. ``?live`` (or ``/livez``) is liveness only.
    """
    if "live" in request.GET:
        return livez(request)
    results = health_checks()
    failed = {name: reason for name, reason in results.items() if reason}
    for name, reason in failed.items():
        logger.warning("healthz: %s failed: %s", name, reason)
    detailed = _may_see_details(request)
    body: dict = {
        "status": "fail" if failed else "ok",
        "checks": {
            name: "ok" if not reason else reason if detailed else public_reason(reason)
            for name, reason in results.items()
        },
    }
    if not failed:
        _add_erasures(body, detailed=detailed)
    return JsonResponse(body, status=503 if failed else 200)


def _add_erasures(body: dict, *, detailed: bool) -> None:
    """The erasure counts (for ``detailed`` callers only) and the ``degraded`` status."""
    erasures = erasure_health()
    if erasures is None:
        return
    if detailed:  # erasure activity is not for anyone who can reach the port
        body["erasures"] = erasures
    if erasures["needs_attention"] or erasures["stale"] or erasures["copies_late"]:
        body["status"] = "degraded"


@never_cache
@require_GET
def livez(request) -> JsonResponse:
    """Liveness: 200 while this process serves requests; it reads no database.

    For a process supervisor's restart check (restarting cures nothing a database
    or an erasure needs); ``/healthz`` is readiness, for a load balancer.
    """
    return JsonResponse({"status": "alive"})


@never_cache
@require_GET
def metrics_view(request) -> HttpResponse:
    """The Prometheus exposition, for a scraper holding ``MEMORYAPP_METRICS_TOKEN``."""
    token = getattr(settings, "MEMORYAPP_METRICS_TOKEN", None)
    if not token:
        raise Http404("metrics are off (MEMORYAPP_METRICS_TOKEN is not set)")
    if not _metrics_token_given(request):
        response = HttpResponse("a bearer token is required\n", status=401)
        response["WWW-Authenticate"] = 'Bearer realm="metrics"'
        return response
    body, content_type = collectors.exposition()
    return HttpResponse(body, content_type=content_type)


class ApiMetricsMiddleware:
    """Counts the API's responses by method and status (``memoryapp_api_responses``)."""

    def __init__(self, get_response) -> None:
        self.get_response = get_response

    def __call__(self, request):
        response = self.get_response(request)
        match = getattr(request, "resolver_match", None)
        if match is not None and "memoryapp_api" in match.namespaces:
            metrics.api_response(request.method, response.status_code)
        return response
