"""Data-subject requests: intake, deadline, actions, links to exports and erasures, closing.

The service behind the admin desk, the API (``/api/subject-requests/``) and tests.
While a request is open it holds the subject key and its namespaces encrypted
(``SubjectRequest.sealed``, a Fernet token under a key derived from
``MEMORYAPP_ERASURE_KEY`` with its own label); closing it drops the token, so
what remains names the subject only by keyed HMAC. Every action writes a history
entry with its actor; no entry, note nor actor holds the subject key (it is
replaced by a placeholder, as receipts do).
"""

from __future__ import annotations

import base64
import calendar
import datetime as dt
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from django.db import transaction
from django.db.models import Count

from memoryapp import conf
from memoryapp import permissions as perms
from memoryapp.compliance import engine
from memoryapp.compliance.export import export
from memoryapp.compliance.lookup import hmacs_of
from memoryapp.compliance.receipts import SUBJECT_PLACEHOLDER, key_id, keyed_hmac, safe_actor
from memoryapp.compliance.selection import (
    ROW_MODELS,
    authored_filter,
    contributed_filter,
    row_filter,
)
from memoryapp.compliance.service import build_target, erase
from memoryapp.fields import now
from memoryapp.models import (
    OPEN_STATUSES,
    ErasureReceipt,
    ExportRecord,
    ExportVia,
    Memory,
    RequestAction,
    RequestStatus,
    SubjectRequest,
    SubjectRequestEvent,
    SubjectRight,
)
from memoryapp.rules.secret_scan import find_secret_family

# A distinct HKDF label from the erasures' sealed requests: one derived key per use.
_INFO = b"memoryapp.compliance.subject-request"
MAX_EXTENSION_MONTHS = 2  # GDPR Art. 12(3)
DUE_SOON_DAYS = 7
EXPORT_TAG = "subject-request:"


class RequestError(ValueError):
    """A request or an action on it that cannot be accepted (the message says why)."""


# ------------------------------------------------------------------ the deadline
def add_months(day: dt.date, months: int) -> dt.date:
    """``day`` plus ``months`` calendar months, clamped to the month's end (31 Jan + 1: 28 Feb)."""
    index = day.month - 1 + months
    year, month = day.year + index // 12, index % 12 + 1
    return dt.date(year, month, min(day.day, calendar.monthrange(year, month)[1]))


def due_date(received_on: dt.date, extension_months: int = 0) -> dt.date:
    """One month after receipt (Art. 12(3)), plus the extension."""
    return add_months(received_on, 1 + extension_months)


def today() -> dt.date:
    """The current date in UTC (deadlines are whole days)."""
    return now().date()


# ------------------------------------------------------------------ sealing the key
def _fernet() -> MultiFernet:
    """The current key first (encrypts), then the fallbacks (decrypt older tokens)."""
    keys = []
    for secret in dict.fromkeys([conf.erasure_key(), *conf.erasure_key_fallbacks()]):
        derived = HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=_INFO).derive(secret)
        keys.append(Fernet(base64.urlsafe_b64encode(derived)))
    return MultiFernet(keys)


def _seal(subject: str, namespaces: Sequence[str]) -> str:
    body = json.dumps({"subject": subject, "namespaces": list(namespaces)})
    return _fernet().encrypt(body.encode("utf-8")).decode("ascii")


@dataclass(frozen=True)
class Sealed:
    """What an open request holds encrypted: the subject key and the namespaces it covers
    (empty: every namespace)."""

    subject: str
    namespaces: tuple[str, ...]


def unseal(request: SubjectRequest) -> Sealed | None:
    """The subject key and namespaces of an open request; None once closed (or no key opens it)."""
    if not request.sealed:
        return None
    try:
        body = json.loads(_fernet().decrypt(request.sealed.encode("ascii")))
    except (InvalidToken, ValueError):
        return None
    return Sealed(str(body["subject"]), tuple(body.get("namespaces") or ()))


# ------------------------------------------------------------------ text checks
def _clean(text: str, subject: str | None, what: str) -> str:
    """``text`` as stored: refused when it holds a secret, the subject key replaced."""
    text = str(text or "").strip()
    family = find_secret_family(text) if text else None
    if family is not None:
        raise RequestError(f"{what} look like they hold a secret ({family}); not saved.")
    if subject and subject in text:
        text = text.replace(subject, SUBJECT_PLACEHOLDER)
    return text


def _log(
    request: SubjectRequest, action: str, actor: str, detail: str = "", subject: str | None = None
) -> SubjectRequestEvent:
    return SubjectRequestEvent.objects.create(
        request=request,
        action=action,
        actor=safe_actor(actor, subject),
        detail=_clean(detail, subject, "Details"),
    )


def _touch(request: SubjectRequest, *fields: str) -> None:
    request.updated_at = now()
    request.save(update_fields=[*fields, "updated_at"])


def require_open(request: SubjectRequest) -> Sealed:
    """What the open ``request`` holds sealed; RequestError when it is closed or unreadable."""
    if not request.is_open:
        raise RequestError(f"The request is {request.get_status_display()}; it is closed.")
    sealed = unseal(request)
    if sealed is None:
        raise RequestError("The request's subject key cannot be read (was the key rotated away?).")
    return sealed


# ------------------------------------------------------------------ intake
def open_request(
    *,
    subject: str,
    right: str,
    actor: str,
    received_on: dt.date | None = None,
    namespaces: Iterable[str] = (),
    assignee=None,
    notes: str = "",
) -> SubjectRequest:
    """Record a new request; its due date is one month after ``received_on`` (default today).

    Raises:
        RequestError: an empty key, an unknown right, a date in the future, or notes
            holding a secret.
    """
    subject = str(subject or "")
    if not subject.strip():
        raise RequestError("A subject key is needed.")
    if right not in SubjectRight.values:
        raise RequestError(f"Unknown right {right!r}.")
    received_on = received_on or today()
    if received_on > today():
        raise RequestError("The received date is in the future.")
    spaces = tuple(dict.fromkeys(str(n) for n in namespaces))
    with transaction.atomic():
        request = SubjectRequest.objects.create(
            right=right,
            received_on=received_on,
            due_on=due_date(received_on),
            assignee=assignee,
            notes=_clean(notes, subject, "Notes"),
            subject_hmac=keyed_hmac(subject),
            key_id=key_id(),
            namespace_count=len(spaces),
            sealed=_seal(subject, spaces),
            created_by=safe_actor(actor, subject),
        )
        _log(request, RequestAction.CREATED, actor, request.get_right_display(), subject)
    return request


# ------------------------------------------------------------------ actions
def may_handle(user) -> bool:
    """Whether ``user`` may be given requests: active staff with the desk's change permission."""
    return bool(user.is_active and user.is_staff and user.has_perm(perms.CHANGE_SUBJECTREQUEST))


def assign(request: SubjectRequest, user, *, actor: str) -> SubjectRequest:
    """Give the request to ``user`` (None: unassigned).

    Raises:
        RequestError: the request is closed, or ``user`` may not handle requests
            (see :func:`may_handle`): a request must sit with someone who can act on it.
    """
    sealed = require_open(request)
    if user is not None and not may_handle(user):
        raise RequestError(f"{user.get_username()} may not handle data-subject requests.")
    request.assignee = user
    _touch(request, "assignee")
    _log(
        request, RequestAction.ASSIGNED, actor, getattr(user, "username", "nobody"), sealed.subject
    )
    return request


def start(request: SubjectRequest, *, actor: str) -> SubjectRequest:
    """Mark the request in progress (once)."""
    sealed = require_open(request)
    if request.status == RequestStatus.IN_PROGRESS:
        return request
    request.status = RequestStatus.IN_PROGRESS
    _touch(request, "status")
    _log(request, RequestAction.STARTED, actor, subject=sealed.subject)
    return request


def extend(request: SubjectRequest, months: int, reason: str, *, actor: str) -> SubjectRequest:
    """Extend the deadline by ``months`` more (at most two in all), with a reason."""
    sealed = require_open(request)
    reason = _clean(reason, sealed.subject, "The reason")
    if not reason:
        raise RequestError("An extension needs a reason.")
    total = request.extension_months + int(months)
    if months < 1 or total > MAX_EXTENSION_MONTHS:
        raise RequestError(f"A request may be extended by {MAX_EXTENSION_MONTHS} months at most.")
    request.extension_months = total
    request.extension_reason = reason
    request.due_on = due_date(request.received_on, total)
    _touch(request, "extension_months", "extension_reason", "due_on")
    _log(request, RequestAction.EXTENDED, actor, f"+{months} month(s): {reason}", sealed.subject)
    return request


def add_note(request: SubjectRequest, text: str, *, actor: str) -> SubjectRequest:
    """Append an internal note (refused if it holds a secret; the subject key is replaced).

    Refused once the request is closed: its key is gone, so a later note could
    not be cleared of it, and a closed request must hold no personal data.
    """
    subject = require_open(request).subject
    text = _clean(text, subject, "Notes")
    if not text:
        raise RequestError("The note is empty.")
    request.notes = f"{request.notes}\n{text}".strip() if request.notes else text
    _touch(request, "notes")
    _log(request, RequestAction.NOTE, actor, text, subject)
    return request


def _namespaces(sealed: Sealed) -> list[str | None]:
    return list(sealed.namespaces) or [None]


def export_for(
    request: SubjectRequest, *, actor: str, via: str = ExportVia.ADMIN, user=None
) -> list[dict]:
    """Export the subject's data for the request (one document per namespace it covers);
    the export records are linked to the request."""
    sealed = require_open(request)
    documents = [
        export(
            subject=sealed.subject,
            namespace=ns,
            actor=actor,
            via=via,
            request_id=EXPORT_TAG + request.id,
            user=user,
        )
        for ns in _namespaces(sealed)
    ]
    records = ExportRecord.objects.filter(request_id=EXPORT_TAG + request.id).exclude(
        subject_requests=request
    )
    request.exports.add(*records)
    if request.status == RequestStatus.OPEN:
        start(request, actor=actor)
    total = sum(
        sum(v for k, v in d["counts"].items() if k != "erasure_receipts") for d in documents
    )
    _log(request, RequestAction.EXPORTED, actor, f"{total} row(s) exported", sealed.subject)
    _touch(request)
    return documents


def erase_for(request: SubjectRequest, *, actor: str, purge: bool = True) -> list[ErasureReceipt]:
    """Erase the subject's data for the request (per namespace it covers); receipts linked.

    ``purge`` as for :func:`~memoryapp.compliance.service.erase`: False leaves the
    purge and verification to the erasure worker (the admin passes ``purge_now()``).
    """
    sealed = require_open(request)
    receipts = [
        erase(subject=sealed.subject, namespace=ns, actor=actor, purge=purge)
        for ns in _namespaces(sealed)
    ]
    request.receipts.add(*receipts)
    if request.status == RequestStatus.OPEN:
        start(request, actor=actor)
    ids = ", ".join(r.id for r in receipts)
    _log(request, RequestAction.ERASED, actor, f"receipt(s) {ids}", sealed.subject)
    _touch(request)
    return receipts


def link_export(request: SubjectRequest, record: ExportRecord, *, actor: str) -> None:
    """Link an export made elsewhere (admin export page) to the request, if it names its subject."""
    _link(request, record, request.exports, RequestAction.EXPORTED, actor)


def link_receipt(request: SubjectRequest, receipt: ErasureReceipt, *, actor: str) -> None:
    """Link an erasure made elsewhere (admin erase page) to the request, if it names its subject."""
    _link(request, receipt, request.receipts, RequestAction.ERASED, actor)


def _link(request, obj, manager, action: str, actor: str) -> None:
    sealed = require_open(request)
    if obj.subject_hmac not in hmacs_of(sealed.subject):
        raise RequestError("That record does not name this request's subject.")
    manager.add(obj)
    _log(request, action, actor, f"{obj._meta.verbose_name} {obj.id}", sealed.subject)
    _touch(request)


def close(request: SubjectRequest, *, refused: bool, outcome: str, actor: str) -> SubjectRequest:
    """Answer or refuse the request: the outcome is recorded and the subject key dropped.

    A refusal needs a reason. After this, the request names its subject only by HMAC.
    """
    sealed = require_open(request)
    outcome = _clean(outcome, sealed.subject, "The outcome")
    if refused and not outcome:
        raise RequestError("A refusal needs a reason.")
    with transaction.atomic():
        status = RequestStatus.REFUSED if refused else RequestStatus.ANSWERED
        at = now()
        # Conditional on the row still being open: of two officers closing at once
        # (or one acting on a page loaded before a colleague closed it), one wins;
        # the other is told, instead of overwriting the recorded outcome.
        won = SubjectRequest.objects.filter(pk=request.pk, status__in=OPEN_STATUSES).update(
            status=status, outcome=outcome, sealed=None, closed_at=at, updated_at=at
        )
        if not won:
            raise RequestError("The request was closed meanwhile; nothing was changed.")
        request.status, request.outcome, request.sealed = status, outcome, None
        request.closed_at = request.updated_at = at
        action = RequestAction.REFUSED if refused else RequestAction.ANSWERED
        _log(request, action, actor, outcome, sealed.subject)
    return request


# ------------------------------------------------------------------ reading
def open_requests():
    """Open and in-progress requests, soonest due first."""
    return SubjectRequest.objects.filter(status__in=OPEN_STATUSES).order_by("due_on", "created_at")


def deadlines(at: dt.date | None = None) -> dict[str, int]:
    """How many open requests are overdue, due within a week, and open in all."""
    at = at or today()
    pending = open_requests()
    return {
        "overdue": pending.filter(due_on__lt=at).count(),
        "due_soon": pending.filter(
            due_on__gte=at, due_on__lte=at + dt.timedelta(days=DUE_SOON_DAYS)
        ).count(),
        "open": pending.count(),
    }


def urgency(request: SubjectRequest, at: dt.date | None = None) -> str:
    """``overdue``, ``due_soon`` or ``""`` for an open request (closed: ``""``)."""
    at = at or today()
    if not request.is_open:
        return ""
    if request.due_on < at:
        return "overdue"
    if request.due_on <= at + dt.timedelta(days=DUE_SOON_DAYS):
        return "due_soon"
    return ""


def requests_for(subject: str):
    """Every request naming ``subject`` (by HMAC under the current and fallback keys)."""
    return SubjectRequest.objects.filter(subject_hmac__in=hmacs_of(subject)).order_by(
        "received_on", "id"
    )


def holdings(
    subject: str, namespaces: Iterable[str] = (), using: str | Sequence[str] | None = None
) -> dict[str, dict[str, int]]:
    """What we hold about ``subject``: ``table -> {namespace: rows}``, reading only.

    The rows an erasure of the subject would select (live and soft-deleted), in
    ``namespaces`` if given; tables holding nothing are left out.
    """
    found: dict[str, dict[str, int]] = {}
    spaces: list[str | None] = list(namespaces) or [None]
    for ns in spaces:
        target = build_target(subject=subject, namespace=ns)
        for alias in engine.aliases_for(using):
            for table, model in ROW_MODELS.items():
                q = row_filter(table, target)
                if q is None:
                    continue
                _tally(found, table, model.objects.using(alias).filter(q))
    return found


# What an erasure keeps on purpose: project memories, named as the export names them.
KEPT_AUTHORED = "project_memories_authored"
KEPT_CONTRIBUTED = "project_memories_contributed"


def kept(
    subject: str, namespaces: Iterable[str] = (), using: str | Sequence[str] | None = None
) -> dict[str, dict[str, int]]:
    """Project memories held about ``subject`` that an erasure keeps: ``kind -> {namespace: rows}``.

    Those it wrote (erased only when asked to include them) and those it contributed to
    through an approved review item while another contributor still supports them. An
    export lists both; "what do we hold" must too, though :func:`holdings` (what the
    erasure removes) does not count them.
    """
    found: dict[str, dict[str, int]] = {}
    for ns in list(namespaces) or [None]:
        target = build_target(subject=subject, namespace=ns)
        parts = (
            (KEPT_AUTHORED, authored_filter(target)),
            (KEPT_CONTRIBUTED, contributed_filter(target)),
        )
        for alias in engine.aliases_for(using):
            for kind, q in parts:
                if q is None:
                    continue
                _tally(found, kind, Memory.objects.using(alias).filter(q))
    return found


def _tally(found: dict[str, dict[str, int]], kind: str, rows) -> None:
    """Add ``rows``' counts per namespace to ``found[kind]`` (kinds with none stay absent)."""
    for row in rows.order_by().values("namespace").annotate(n=Count("pk")):
        per = found.setdefault(kind, {})
        per[row["namespace"]] = per.get(row["namespace"], 0) + row["n"]
