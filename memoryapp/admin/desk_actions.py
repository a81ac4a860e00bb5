"""The actions on a data-subject request, posted from its admin change page.

Each action is a small POST form on the request's page, handled here through
the service (:mod:`memoryapp.compliance.desk`), so each one lands in the
request's history with its actor and the same rules hold as in the API: start,
assign, extend, note, export, erase, answer and refuse. The destructive ones
(erase, and closing, which drops the subject key) show a confirmation first;
an export of a subject that holds nothing shows a warning before the download.

The subject key never travels: the forms post only the request's id (in the
URL) and the officer's input, and the pages show counts, never the key.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from django.contrib import messages
from django.contrib.auth import get_user_model
from django.http import Http404, HttpResponse, HttpResponseNotAllowed, HttpResponseRedirect
from django.urls import path, reverse
from django.utils.formats import date_format
from django.utils.html import format_html, format_html_join

from memoryapp import permissions as perms
from memoryapp.admin.base import actor
from memoryapp.admin.compliance import ERASE_PERM, EXPORT_PERM, page
from memoryapp.admin.confirm import confirmed
from memoryapp.admin.labels import TABLE_LABELS, namespace_label
from memoryapp.admin.responses import forbidden, json_download, worker_note
from memoryapp.compliance import desk, purge_now
from memoryapp.compliance.desk_actions import DESK_ACTIONS, desk_action
from memoryapp.compliance.desk_scope import visible_requests
from memoryapp.compliance.holdings import (
    KEPT_AUTHORED,
    KEPT_CONTRIBUTED,
    OWN_NAMESPACE,
    holdings,
    holds_any,
    kept,
    within_reach,
)
from memoryapp.fields import now
from memoryapp.models import ExportVia, SubjectRequest, SubjectRight

CONFIRM_TEMPLATE = "memoryapp/admin/request_confirm.html"
ERASABLE_RIGHTS = (SubjectRight.ERASURE,)
NOT_ERASABLE = "Erasure answers an erasure request; this one is for {right}."
MAX_ID_CHARS = SubjectRequest._meta.get_field("id").max_length or 32


@dataclass(frozen=True)
class Action:
    """One action of the desk: the permissions it needs beyond changing requests, its handler."""

    label: str
    run: Callable[..., HttpResponse | str]
    needs: tuple[str, ...] = ()


# ------------------------------------------------------------------ the small ones
def _start(modeladmin, request, subject_request: SubjectRequest) -> str:
    desk_action("start").service(subject_request, actor=actor(request))
    return "The request is in progress."


def _assign(modeladmin, request, subject_request: SubjectRequest) -> str:
    chosen = request.POST.get("assignee", "").strip()
    user = None
    if chosen:
        # ASCII digits only: "²".isdigit() is true too, and the query then raised (a 500).
        known = chosen.isascii() and chosen.isdigit() and len(chosen) <= 18
        user = get_user_model().objects.filter(pk=int(chosen)).first() if known else None
        if user is None:
            raise desk.RequestError("No such user.")
    desk_action("assign").service(subject_request, user, actor=actor(request))
    return f"Assigned to {user.get_username()}." if user else "The request is unassigned."


def _extend(modeladmin, request, subject_request: SubjectRequest) -> str:
    try:
        months = int(request.POST.get("months", ""))
    except ValueError:
        raise desk.RequestError("Choose 1 or 2 months.") from None
    desk_action("extend").service(
        subject_request, months, request.POST.get("reason", ""), actor=actor(request)
    )
    return f"The deadline is now {date_format(subject_request.due_on, 'DATE_FORMAT')}."


def _note(modeladmin, request, subject_request: SubjectRequest) -> str:
    desk_action("note").service(subject_request, request.POST.get("text", ""), actor=actor(request))
    return "The note was added."


# ------------------------------------------------------------------ export
def holds_anything(sealed: desk.Sealed) -> bool:
    """True when an export for the request would list at least one stored row."""
    # Project memories it wrote or contributed to are exported too, though an erasure keeps them.
    return holds_any(sealed.subject, sealed.namespaces)


def _export(modeladmin, request, subject_request: SubjectRequest) -> HttpResponse | str:
    """One click: the download; a subject holding nothing is a warning page first."""
    sealed = desk.require_open(subject_request)
    if not confirmed(request) and not holds_anything(sealed):
        return _confirm_page(modeladmin, request, subject_request, step="empty", action="export")
    documents = desk_action("export").service(
        subject_request, actor=actor(request), via=ExportVia.ADMIN, user=request.user
    )
    document = documents[0] if len(documents) == 1 else {"documents": documents}
    # Named by the request (hex id), never by the subject key.
    return json_download(
        document, f"export-request-{subject_request.pk[:8]}-{now():%Y%m%d-%H%M%S}.json"
    )


# ------------------------------------------------------------------ erase


def holdings_rows(sealed: desk.Sealed, user=None) -> list[dict]:
    """What we hold about the request's subject, a row per table and namespace (counts only).

    A user-scope namespace is the user key itself: it is named, not shown, so the
    key stays off the page as everywhere else after intake. A tenant-scoped officer
    (``user``) sees, and erases, what lies in their tenants' namespaces only.
    """
    found = within_reach(holdings(sealed.subject, sealed.namespaces), user)
    return _rows(sealed, found, TABLE_LABELS)


KEPT_LABELS = {
    KEPT_AUTHORED: "Project memories they wrote",
    KEPT_CONTRIBUTED: "Project memories others also proposed",
}


def kept_rows(sealed: desk.Sealed, user=None) -> list[dict]:
    """The project memories an erasure keeps (exported all the same), as :func:`holdings_rows`."""
    return _rows(sealed, within_reach(kept(sealed.subject, sealed.namespaces), user), KEPT_LABELS)


def _rows(sealed: desk.Sealed, found: dict[str, dict[str, int]], labels: dict) -> list[dict]:
    return [
        {
            "table": table,
            "label": labels.get(table, table),
            "namespace": OWN_NAMESPACE if ns == sealed.subject else namespace_label(ns),
            "count": n,
        }
        for table, per in found.items()
        for ns, n in sorted(per.items())
    ]


def _erase(modeladmin, request, subject_request: SubjectRequest) -> HttpResponse | str:
    """The holdings and a confirmation; confirmed, the erasure and its receipts, linked."""
    if subject_request.right not in ERASABLE_RIGHTS:
        raise desk.RequestError(NOT_ERASABLE.format(right=subject_request.get_right_display()))
    sealed = desk.require_open(subject_request)
    if not confirmed(request):
        rows = holdings_rows(sealed, request.user)
        return _confirm_page(
            modeladmin,
            request,
            subject_request,
            step="erase",
            action="erase",
            rows=rows,
            total=sum(r["count"] for r in rows),
            kept=kept_rows(sealed, request.user),
        )
    receipts = desk_action("erase").service(
        subject_request, actor=actor(request), purge=purge_now(), user=request.user
    )
    links = format_html_join(
        ", ",
        '<a href="{}">{}</a>',
        ((reverse("admin:memoryapp_erasurereceipt_change", args=[r.pk]), r.pk) for r in receipts),
    )
    note = worker_note(receipts[-1]) if receipts else ""
    return format_html("Erased; the receipt is linked to this request: {}.{}", links, note)


# ------------------------------------------------------------------ closing
def _close(refused: bool):
    def run(modeladmin, request, subject_request: SubjectRequest) -> HttpResponse | str:
        sealed = desk.require_closable(subject_request)  # a key rotated away: still closable
        # Checked and cleared of the key before the confirmation: the page shows (and
        # posts back) what will be recorded, never the key, and a secret is refused
        # before it is echoed into a page.
        outcome = desk.checked_outcome(sealed, request.POST.get("outcome", ""), refused=refused)
        if not confirmed(request):
            step = "refuse" if refused else "answer"
            return _confirm_page(
                modeladmin, request, subject_request, step=step, action=step, outcome=outcome
            )
        closing = desk_action("refuse" if refused else "answer")
        closing.service(subject_request, outcome=outcome, actor=actor(request))
        return (
            "The request is refused and closed; the subject key is dropped."
            if refused
            else "The request is answered and closed; the subject key is dropped."
        )

    return run


# How the admin runs each action of the desk; their names, labels and permissions come
# from the one registry (memoryapp.compliance.desk_actions), in its order.
RUNS: dict[str, Callable[..., HttpResponse | str]] = {
    "start": _start,
    "assign": _assign,
    "extend": _extend,
    "note": _note,
    "export": _export,
    "erase": _erase,
    "answer": _close(refused=False),
    "refuse": _close(refused=True),
}
ACTIONS: dict[str, Action] = {a.name: Action(a.label, RUNS[a.name], a.needs) for a in DESK_ACTIONS}


# ------------------------------------------------------------------ the view
def action_view(modeladmin, request, object_id: str, name: str) -> HttpResponse:
    """Run one action on one request (POST only); refusals come back as an error message."""
    action = ACTIONS.get(name)
    if action is None:
        raise Http404("No such action.")
    for perm in (perms.CHANGE_SUBJECTREQUEST, *action.needs):
        if not request.user.has_perm(perm):
            return forbidden(modeladmin, request, perm, action.label)
    if request.method != "POST":
        return HttpResponseNotAllowed(["POST"])
    subject_request = find_request(object_id, request.user)
    if subject_request is None:
        raise Http404("No such request.")
    change = reverse("admin:memoryapp_subjectrequest_change", args=[subject_request.pk])
    try:
        result = action.run(modeladmin, request, subject_request)
    except desk.RequestError as exc:
        modeladmin.message_user(request, f"{action.label}: {exc}", messages.ERROR)
        return HttpResponseRedirect(change)
    if isinstance(result, HttpResponse):
        return result
    modeladmin.message_user(request, result, messages.SUCCESS)
    return HttpResponseRedirect(change)


def find_request(object_id: str, user=None) -> SubjectRequest | None:
    """The request with this id, among those of ``user``'s tenants; None for an id no
    request can have (a NUL character, which PostgreSQL refuses with an error, or longer
    than the column), an unknown one or another tenant's (all three a 404)."""
    if len(object_id) > MAX_ID_CHARS or "\x00" in object_id:
        return None
    return visible_requests(user).filter(pk=object_id).first()


def _confirm_page(
    modeladmin, request, subject_request: SubjectRequest, *, step: str, action: str, **extra
):
    response = page(
        modeladmin,
        request,
        CONFIRM_TEMPLATE,
        title=f"{ACTIONS[action].label}: request {subject_request.pk[:8]}",
        step=step,
        subject_request=subject_request,
        action_url=reverse("admin:memoryapp_subjectrequest_act", args=[subject_request.pk, action]),
        change_url=reverse("admin:memoryapp_subjectrequest_change", args=[subject_request.pk]),
        **extra,
    )
    response["Cache-Control"] = "no-store"
    return response


def urls(modeladmin) -> list:
    """The desk's URL, ``<id>/act/<action>/``, before the admin's own catch-all ``<id>/``."""

    def act(request, object_id: str, name: str):
        return action_view(modeladmin, request, object_id, name)

    view = modeladmin.admin_site.admin_view(act)
    return [path("<path:object_id>/act/<slug:name>/", view, name="memoryapp_subjectrequest_act")]


# ------------------------------------------------------------------ the change page
def assignable_users(subject_request: SubjectRequest | None = None):
    """Active staff who may handle requests (``subject_request``: this one, by their desk grants;
    superusers included), by name."""
    users = get_user_model().objects.filter(is_active=True, is_staff=True).order_by("username")
    return [u for u in users if desk.may_handle(u, subject_request)]


def panel(request, subject_request: SubjectRequest) -> dict:
    """The change page's context: which actions this user may run on this request."""
    user = request.user
    may_change = user.has_perm(perms.CHANGE_SUBJECTREQUEST)
    return {
        "desk_open": subject_request.is_open,
        "desk_can_act": may_change and subject_request.is_open,
        "desk_can_export": may_change and subject_request.is_open and user.has_perm(EXPORT_PERM),
        # Erasure answers an erasure request only: an access request offering "Erase…"
        # invited the one click that cannot be undone.
        "desk_can_erase": may_change
        and subject_request.is_open
        and subject_request.right in ERASABLE_RIGHTS
        and user.has_perm(ERASE_PERM),
        "desk_users": assignable_users(subject_request)
        if may_change and subject_request.is_open
        else [],
        "desk_months": range(1, desk.MAX_EXTENSION_MONTHS - subject_request.extension_months + 1),
        "desk_urgency": desk.urgency(subject_request),
        # The record changes only through the actions: no Save buttons.
        "show_save": False,
        "show_save_and_continue": False,
        "show_save_and_add_another": False,
        "show_delete": False,
    }
