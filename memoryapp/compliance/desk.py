"""Data-subject requests: intake, deadline, actions, links to exports and erasures, closing.

The service behind the admin desk, the API (``/api/subject-requests/``) and tests.
While a request is open it holds the subject key and its namespaces encrypted
(``SubjectRequest.sealed``, a Fernet token under a key derived from
``MEMORYAPP_ERASURE_KEY`` for its own purpose: :mod:`memoryapp.compliance.sealing`);
closing it drops the token, so what remains names the subject only by keyed HMAC.
Every action writes a history entry with its actor; no entry, note nor actor
holds the subject key (it is replaced by a placeholder, as receipts do).
"""

from __future__ import annotations

import calendar
import datetime as dt
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from django.db import transaction

from memoryapp import permissions as perms
from memoryapp.compliance import sealing
from memoryapp.compliance.desk_scope import (
    may_handle_tenant,
    tenant_of,
    visible_requests,
)
from memoryapp.compliance.export import export
from memoryapp.compliance.holdings import desk_reach
from memoryapp.compliance.lookup import hmacs_of, lookup
from memoryapp.compliance.receipts import key_id, keyed_hmac, safe_actor
from memoryapp.compliance.request_input import (
    RequestError,
    check_namespaces,
    check_subject,
    clean_text,
)
from memoryapp.compliance.service import erase
from memoryapp.fields import now
from memoryapp.models import (
    OPEN_STATUSES,
    ErasureReceipt,
    ExportRecord,
    ExportVia,
    RequestAction,
    RequestStatus,
    SubjectRequest,
    SubjectRequestEvent,
    SubjectRight,
)

# A distinct HKDF label from the erasures' sealed requests: one derived key per use. The
# requests already stored were sealed under it: never change it.
PURPOSE = b"memoryapp.compliance.subject-request"
MAX_EXTENSION_MONTHS = 2  # GDPR Art. 12(3)
DUE_SOON_DAYS = 7
REFERENCE_CHARS = SubjectRequest._meta.get_field("reference").max_length or 200
EXPORT_TAG = "subject-request:"
TENANT_REFUSED = "The key's tenant is not one your desk handles."
CLOSED_MEANWHILE = "The request was closed meanwhile; nothing was changed."
CHANGED_MEANWHILE = "The request was changed meanwhile; reload it and try again."
UNREADABLE = (
    "The request's subject key cannot be read (was MEMORYAPP_ERASURE_KEY or SECRET_KEY "
    "changed without keeping the old one as a fallback?). It can still be answered or "
    "refused; open a new request with the key to act on it."
)


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
def _seal(subject: str, namespaces: Sequence[str]) -> str:
    body = json.dumps({"subject": subject, "namespaces": list(namespaces)})
    return sealing.seal(PURPOSE, body)


@dataclass(frozen=True)
class Sealed:
    """What an open request holds encrypted: the subject key and the namespaces it covers
    (empty: every namespace)."""

    subject: str
    namespaces: tuple[str, ...]


def unseal(request: SubjectRequest) -> Sealed | None:
    """The subject key and namespaces of an open request; None once closed (or no key opens it)."""
    body = sealing.unseal_json(PURPOSE, request.sealed)
    if body is None:
        return None
    return Sealed(str(body["subject"]), tuple(body.get("namespaces") or ()))


# ------------------------------------------------------------------ history and saving
def _log(
    request: SubjectRequest, action: str, actor: str, detail: str = "", subject: str | None = None
) -> SubjectRequestEvent:
    return SubjectRequestEvent.objects.create(
        request=request,
        action=action,
        actor=safe_actor(actor, subject),
        # The detail quotes input checked already (a note, a reason): not limited again.
        detail=clean_text(detail, subject, "Details", limit=None),
    )


def _save_open(request: SubjectRequest, values: dict | None = None, **expected) -> None:
    """Write ``values`` (default: nothing but the time) on the request's row if it is
    still open and still holds ``expected``; RequestError otherwise.

    One conditional UPDATE rather than ``save()``: the object in hand may have been
    read before a colleague closed the request or changed it (a page loaded earlier,
    two officers at once), and saving its fields would reopen a closed request or
    lose the colleague's change.
    """
    at = now()
    rows = SubjectRequest.objects.filter(pk=request.pk, status__in=OPEN_STATUSES, **expected)
    if not rows.update(**(values or {}), updated_at=at):
        closed = not _reread(request).is_open
        raise RequestError(CLOSED_MEANWHILE if closed else CHANGED_MEANWHILE)
    request.updated_at = at


def _reread(request: SubjectRequest) -> SubjectRequest:
    """``request`` with its row as stored now (another officer may have acted since)."""
    request.refresh_from_db()
    return request


def _mark_started(request: SubjectRequest, actor: str, subject: str) -> None:
    """Open -> in progress, if it still is open (an export or erasure has begun work on it)."""
    at = now()
    rows = SubjectRequest.objects.filter(pk=request.pk, status=RequestStatus.OPEN)
    if rows.update(status=RequestStatus.IN_PROGRESS, updated_at=at):
        request.status, request.updated_at = RequestStatus.IN_PROGRESS, at
        _log(request, RequestAction.STARTED, actor, subject=subject)


def _record_done(request: SubjectRequest, action: str, actor: str, detail: str, subject: str):
    """The history entry of an export or erasure, written even if the request was closed
    while it ran: the work was asked for while it was open, and the record is the proof."""
    _mark_started(request, actor, subject)
    _log(request, action, actor, detail, subject)
    SubjectRequest.objects.filter(pk=request.pk).update(updated_at=now())


def require_open(request: SubjectRequest) -> Sealed:
    """What the open ``request`` holds sealed, read from its row as stored now;
    RequestError when it is closed (perhaps by a colleague since it was loaded) or
    its key cannot be read."""
    sealed = require_closable(request)
    if sealed is None:
        raise RequestError(UNREADABLE)
    return sealed


def require_closable(request: SubjectRequest) -> Sealed | None:
    """What the open ``request`` holds sealed, or None when no key opens it any more;
    RequestError when it is closed (perhaps by a colleague since it was loaded).

    Closing needs no key: a request whose key was rotated away can still be answered
    or refused, instead of staying open, and overdue, for good.
    """
    was_open = request.is_open
    _reread(request)
    if not request.is_open:
        if was_open:  # a colleague closed it since this copy was read
            raise RequestError(CLOSED_MEANWHILE)
        raise RequestError(f"The request is {request.get_status_display()}; it is closed.")
    return unseal(request)


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
    reference: str = "",
    user=None,
) -> SubjectRequest:
    """Record a new request; its due date is one month after ``received_on`` (default today).

    The request's tenant is the key's (:func:`tenant_of`); ``user``, the staff user
    recording it, must handle that tenant (their desk grants), or they could not see
    the request they made. ``reference`` is the officer's own label for it (a ticket,
    a name), the key replaced in it as in notes.

    Raises:
        RequestError: an empty key, an unknown right, a date in the future, notes
            holding a secret, or a tenant ``user`` does not handle.
    """
    subject = check_subject(subject)
    tenant = tenant_of(subject)
    if user is not None and not may_handle_tenant(user, tenant):
        raise RequestError(TENANT_REFUSED)
    if right not in SubjectRight.values:
        raise RequestError(f"Unknown right {right!r}.")
    received_on = received_on or today()
    if received_on > today():
        raise RequestError("The received date is in the future.")
    spaces = check_namespaces(namespaces)
    with transaction.atomic():
        request = SubjectRequest.objects.create(
            right=right,
            received_on=received_on,
            due_on=due_date(received_on),
            assignee=assignee,
            notes=clean_text(notes, subject, "Notes"),
            reference=clean_text(reference, subject, "The reference", limit=REFERENCE_CHARS),
            tenant=tenant,
            subject_hmac=keyed_hmac(subject),
            key_id=key_id(),
            namespace_count=len(spaces),
            sealed=_seal(subject, spaces),
            created_by=safe_actor(actor, subject),
        )
        _log(request, RequestAction.CREATED, actor, request.get_right_display(), subject)
    return request


# ------------------------------------------------------------------ actions
def may_handle(user, request: SubjectRequest | None = None) -> bool:
    """Whether ``user`` may be given requests (``request``: this one): active staff with
    the desk's change permission, whose desk grants cover the request's tenant."""
    if not (user.is_active and user.is_staff and user.has_perm(perms.CHANGE_SUBJECTREQUEST)):
        return False
    return request is None or may_handle_tenant(user, request.tenant)


def assign(request: SubjectRequest, user, *, actor: str) -> SubjectRequest:
    """Give the request to ``user`` (None: unassigned).

    Raises:
        RequestError: the request is closed, or ``user`` may not handle requests
            (see :func:`may_handle`): a request must sit with someone who can act on it.
    """
    sealed = require_open(request)
    if user is not None and not may_handle(user, request):
        raise RequestError(f"{user.get_username()} may not handle data-subject requests.")
    with transaction.atomic():
        _save_open(request, {"assignee": user})
        request.assignee = user
        name = getattr(user, "username", "nobody")
        _log(request, RequestAction.ASSIGNED, actor, name, sealed.subject)
    return request


def start(request: SubjectRequest, *, actor: str) -> SubjectRequest:
    """Mark the request in progress (once)."""
    sealed = require_open(request)
    with transaction.atomic():
        _mark_started(request, actor, sealed.subject)  # already in progress: nothing to do
    return request


def extend(request: SubjectRequest, months: int, reason: str, *, actor: str) -> SubjectRequest:
    """Extend the deadline by ``months`` more (at most two in all), with a reason."""
    sealed = require_open(request)
    reason = clean_text(reason, sealed.subject, "The reason")
    if not reason:
        raise RequestError("An extension needs a reason.")
    before = request.extension_months
    total = before + int(months)
    if months < 1 or total > MAX_EXTENSION_MONTHS:
        raise RequestError(f"A request may be extended by {MAX_EXTENSION_MONTHS} months at most.")
    due = due_date(request.received_on, total)
    values = {"extension_months": total, "extension_reason": reason, "due_on": due}
    with transaction.atomic():
        # Conditional on the extension read above: of two extensions at once, the
        # second is refused rather than both counted as one.
        _save_open(request, values, extension_months=before)
        request.extension_months, request.extension_reason, request.due_on = total, reason, due
        detail = f"+{months} month(s): {reason}"
        _log(request, RequestAction.EXTENDED, actor, detail, sealed.subject)
    return request


def add_note(request: SubjectRequest, text: str, *, actor: str) -> SubjectRequest:
    """Append an internal note (refused if it holds a secret; the subject key is replaced).

    Refused once the request is closed: its key is gone, so a later note could
    not be cleared of it, and a closed request must hold no personal data.
    """
    subject = require_open(request).subject
    text = clean_text(text, subject, "Notes")
    if not text:
        raise RequestError("The note is empty.")
    before = request.notes
    notes = f"{before}\n{text}".strip() if before else text
    with transaction.atomic():
        # Conditional on the notes read above: a colleague's note added meanwhile is
        # not overwritten (this one is refused; the page shows both after a reload).
        _save_open(request, {"notes": notes}, notes=before)
        request.notes = notes
        _log(request, RequestAction.NOTE, actor, text, subject)
    return request


def _namespaces(sealed: Sealed) -> list[str | None]:
    return list(sealed.namespaces) or [None]


def _reach(user, subject: str, namespace: str | None):
    # A request naming no namespace covers the person everywhere: a tenant-scoped
    # officer's action still stays in their tenants' namespaces (desk_reach).
    return desk_reach(user, subject) if namespace is None and user is not None else None


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
            grants=_reach(user, sealed.subject, ns),
        )
        for ns in _namespaces(sealed)
    ]
    records = ExportRecord.objects.filter(request_id=EXPORT_TAG + request.id).exclude(
        subject_requests=request
    )
    total = sum(
        sum(v for k, v in d["counts"].items() if k != "erasure_receipts") for d in documents
    )
    with transaction.atomic():
        request.exports.add(*records)
        detail = f"{total} row(s) exported"
        _record_done(request, RequestAction.EXPORTED, actor, detail, sealed.subject)
    return documents


def erase_for(
    request: SubjectRequest, *, actor: str, purge: bool = True, user=None
) -> list[ErasureReceipt]:
    """Erase the subject's data for the request (per namespace it covers); receipts linked.

    ``purge`` as for :func:`~memoryapp.compliance.service.erase`: False leaves the
    purge and verification to the erasure worker (the admin passes ``purge_now()``).
    ``user``: the officer acting (None: the command line); a tenant-scoped one erases
    in their tenants' namespaces only.
    """
    sealed = require_open(request)
    receipts = [
        erase(
            subject=sealed.subject,
            namespace=ns,
            actor=actor,
            purge=purge,
            grants=_reach(user, sealed.subject, ns),
        )
        for ns in _namespaces(sealed)
    ]
    ids = ", ".join(r.id for r in receipts)
    with transaction.atomic():
        request.receipts.add(*receipts)
        _record_done(request, RequestAction.ERASED, actor, f"receipt(s) {ids}", sealed.subject)
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
    with transaction.atomic():
        manager.add(obj)
        _save_open(request)
        _log(request, action, actor, f"{obj._meta.verbose_name} {obj.id}", sealed.subject)


def checked_outcome(sealed: Sealed | None, outcome: str, *, refused: bool) -> str:
    """The outcome as :func:`close` stores it: refused when it holds a secret or is too
    long, the key replaced (when it can still be read); a refusal needs one. For a
    confirmation page to show what will be recorded (and refuse early) before anything
    is done."""
    outcome = clean_text(outcome, sealed.subject if sealed else None, "The outcome")
    if refused and not outcome:
        raise RequestError("A refusal needs a reason.")
    return outcome


def close(request: SubjectRequest, *, refused: bool, outcome: str, actor: str) -> SubjectRequest:
    """Answer or refuse the request: the outcome is recorded and the subject key dropped.

    A refusal needs a reason. After this, the request names its subject only by HMAC.
    """
    sealed = require_closable(request)
    outcome = checked_outcome(sealed, outcome, refused=refused)
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
            raise RequestError(CLOSED_MEANWHILE)
        request.status, request.outcome, request.sealed = status, outcome, None
        request.closed_at = request.updated_at = at
        action = RequestAction.REFUSED if refused else RequestAction.ANSWERED
        _log(request, action, actor, outcome, sealed.subject if sealed else None)
    return request


# ------------------------------------------------------------------ reading
def open_requests(user=None):
    """Open and in-progress requests (of the tenants ``user`` handles), soonest due first."""
    pending = visible_requests(user).filter(status__in=OPEN_STATUSES)
    return pending.order_by("due_on", "created_at")


def deadlines(at: dt.date | None = None, user=None) -> dict[str, int]:
    """How many open requests (of ``user``'s tenants) are overdue, due within a week, and
    open in all."""
    at = at or today()
    pending = open_requests(user)
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


def requests_for(subject: str, user=None):
    """Every request naming ``subject`` (of the tenants ``user`` handles): the lookup's
    (by HMAC under the current and fallback keys), by received date."""
    return lookup(subject, requests=visible_requests(user)).requests
