"""Compliance pages: erase a subject, wipe a namespace (not erasure), export, look a key up,
and the printable receipt."""

from __future__ import annotations

import functools
import secrets

from django import forms
from django.contrib import admin, messages
from django.http import Http404, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils.html import format_html
from django.utils.text import slugify

from memoryapp import conf
from memoryapp import permissions as perms
from memoryapp.admin.common import (
    ReadOnlyAdmin,
    actor,
    confirmed,
    count_rows,
    db_for,
    forbidden,
    json_download,
    namespace_label,
)
from memoryapp.admin.forms import EraseSubjectForm, ExportForm, WipeForm
from memoryapp.compliance import (
    ErasureRequestError,
    ReceiptInProgress,
    attention,
    authored_count,
    erase,
    export,
    preview,
    purge_now,
    receipt_as_dict,
    retry_purge,
)
from memoryapp.compliance.lookup import lookup
from memoryapp.conf import PURGE_METHODS
from memoryapp.facade import MemoryManager
from memoryapp.fields import now
from memoryapp.models import (
    ErasureReceipt,
    ExportRecord,
    ExportVia,
    Memory,
    ReceiptState,
    ReviewItem,
    SessionSummary,
)
from memoryapp.rules.receipt_text import summarize
from memoryapp.rules.wording import plural

ERASE_PERM = perms.ERASE_MEMORY
WIPE_PERM = perms.WIPE_MEMORY
EXPORT_PERM = perms.EXPORT_MEMORY


def links(user) -> dict:
    """Which compliance pages ``user`` may open (for the index and the receipts list)."""
    return {
        "can_erase_subject": user.has_perm(ERASE_PERM),
        "can_wipe": user.has_perm(WIPE_PERM),
        "can_export": user.has_perm(EXPORT_PERM),
        "can_see_receipts": perms.can_see_receipts(user),
        "can_lookup": can_lookup(user),
    }


def can_lookup(user) -> bool:
    """Who may look a subject key up: whoever may read receipts or export."""
    return perms.can_see_receipts(user) or user.has_perm(EXPORT_PERM)


def known_namespaces(limit: int = 500) -> list[str]:
    """Namespaces that hold something, for the forms' suggestions."""
    found: set[str] = set()
    for model in (Memory, SessionSummary, ReviewItem):
        found.update(
            model.objects.using(db_for(model))
            .order_by()
            .values_list("namespace", flat=True)
            .distinct()[:limit]
        )
    return sorted(found)[:limit]


def _page(modeladmin, request, template: str, **context) -> TemplateResponse:
    request.current_app = modeladmin.admin_site.name
    return TemplateResponse(
        request,
        template,
        {**modeladmin.admin_site.each_context(request), "opts": modeladmin.model._meta, **context},
    )


def _requires(perm: str, page: str):
    """A compliance view opens only with ``perm``; without it, the admin's styled 403."""

    def decorate(view):
        @functools.wraps(view)
        def checked(modeladmin, request):
            if not request.user.has_perm(perm):
                return forbidden(modeladmin, request, perm, page)
            return view(modeladmin, request)

        return checked

    return decorate


# ------------------------------------------------------------ erase a subject
@_requires(ERASE_PERM, "Erase a subject")
def erase_subject_view(modeladmin, request):
    """Form → confirmation with the counts per table → erasure → the receipt."""
    form = EraseSubjectForm(request.POST if request.method == "POST" else None)
    title = "Erase a subject"
    if request.method == "POST" and form.is_valid():
        subject = form.cleaned_data["subject"]
        include = form.cleaned_data["include_authored"]
        if not confirmed(request):
            found = preview(subject=subject, include_authored=include)
            counts = count_rows(found["counts"])
            return _page(
                modeladmin,
                request,
                "memoryapp/admin/erase_subject.html",
                title=title,
                step="confirm",
                form=form,
                subject=subject,
                include_authored=include,
                counts=counts,
                total=sum(r["count"] for r in counts),
                kept=found.get("project_memories_kept", 0),
                authored=authored_count(subject),
            )
        try:
            receipt = erase(
                subject=subject, include_authored=include, actor=actor(request), purge=purge_now()
            )
        except ErasureRequestError as exc:
            form.add_error("subject", str(exc))
        else:
            modeladmin.message_user(request, erased_message(receipt), messages.SUCCESS)
            return HttpResponseRedirect(
                reverse("admin:memoryapp_erasurereceipt_change", args=[receipt.pk])
            )
    return _page(
        modeladmin,
        request,
        "memoryapp/admin/erase_subject.html",
        title=title,
        step="form",
        form=form,
    )


def erased_message(receipt) -> str:
    """What the operator is told after an erasure: done, or deleted and left to the worker."""
    if receipt.state != ReceiptState.COMPLETE and not purge_now():
        return (
            "The subject's rows are deleted. The erasure worker purges the files and "
            "verifies; this receipt follows it, refreshing itself until it is done."
        )
    if receipt.purge_status.startswith("not purged"):
        return (
            "The subject's rows are deleted, but the purge is not complete: "
            "see the receipt's purge status."
        )
    return "The subject was erased. This receipt is the proof; it holds no erased text."


# ------------------------------------------------------------ needs attention
def retry_command(receipt_id: str, method: str | None = None) -> str:
    """The exact command that retries one receipt in the foreground."""
    extra = f" --method {method}" if method else ""
    return f"python manage.py memory erase --retry {receipt_id}{extra}"


def attention_summary(user) -> dict | None:
    """The overview's banner: erasures a person must look at (None when there are none)."""
    found = attention.status()
    if not found.problems:
        return None
    receipts = list(attention.needing_attention()[:5])
    return {
        "needs_attention": found.needs_attention,
        "stale": found.stale,
        "stale_after": _duration(found.stale_after),
        "receipts": receipts,
        "more": max(found.problems - len(receipts), 0),
        "command": retry_command("<id>"),
        "can_see_receipts": links(user)["can_see_receipts"],
    }


def attention_guidance(receipt: ErasureReceipt, user) -> dict | None:
    """The receipt page's banner: what happened, what was tried, what to do next."""
    stuck = receipt.state == ReceiptState.NEEDS_ATTENTION
    stale = attention.is_stale(receipt)
    if not (stuck or stale):
        return None
    details = receipt.details if isinstance(receipt.details, dict) else {}
    episode = details.get("attention") or {}
    residue = receipt.purged and not receipt.verified
    return {
        "needs_attention": stuck,
        "stale": stale,
        "stale_after": _duration(conf.erasure_stale_after()),
        "attempts": plural(receipt.attempts, "attempt", "attempts"),
        "since": episode.get("since"),
        "next_attempt": details.get("next_attempt"),
        "phase": episode.get("phase") or str(receipt.state),
        "residue": residue,
        "command": retry_command(receipt.pk),
        "rewrite_command": retry_command(receipt.pk, "rewrite"),
        "can_retry": user.has_perm(ERASE_PERM),
        "retry_url": reverse("admin:memoryapp_erasurereceipt_retry", args=[receipt.pk]),
    }


def _duration(seconds: float) -> str:
    if seconds >= 3600 and seconds % 3600 == 0:
        return plural(int(seconds // 3600), "hour", "hours")
    if seconds >= 60 and seconds % 60 == 0:
        return plural(int(seconds // 60), "minute", "minutes")
    return plural(int(seconds), "second", "seconds")


def retry_receipt_view(modeladmin, request, object_id: str):
    """ "Retry now" on one receipt: a confirmation, then the retry in this request."""
    if not request.user.has_perm(ERASE_PERM):
        return forbidden(modeladmin, request, ERASE_PERM, "Retry an erasure")
    receipt = modeladmin.get_object(request, object_id)
    if receipt is None:
        raise Http404("no such erasure receipt")
    change = reverse("admin:memoryapp_erasurereceipt_change", args=[receipt.pk])
    if receipt.state == ReceiptState.COMPLETE:
        modeladmin.message_user(request, "This erasure is already complete.", messages.INFO)
        return HttpResponseRedirect(change)
    method = request.POST.get("method") or None
    if method not in (None, *PURGE_METHODS):
        method = None
    if request.method == "POST" and confirmed(request):
        before = receipt.attempts
        try:
            (done,) = retry_purge(receipt, method=method) or [receipt]
        except ReceiptInProgress as held:
            # The worker (or a request) runs it right now: two runs at once could
            # overwrite each other's outcome. Say so; nothing was attempted.
            text = f"Not retried: this {held}."
            modeladmin.message_user(request, text, messages.WARNING)
            return HttpResponseRedirect(change)
        if done.state == ReceiptState.COMPLETE:
            text, level = "The erasure is complete: purged and verified.", messages.SUCCESS
        else:
            why = done.purge_status if not done.purged else "the verification still fails"
            text = (
                f"The retry (attempt {done.attempts}) did not complete the erasure: {why}. "
                "See the verification below"
                + ("" if method == "rewrite" else "; retrying with the full rewrite may help")
                + "."
            )
            level = messages.WARNING if done.attempts > before else messages.ERROR
        modeladmin.message_user(request, text, level)
        return HttpResponseRedirect(change)
    return _page(
        modeladmin,
        request,
        "memoryapp/admin/retry_receipt.html",
        title="Retry an erasure",
        receipt=receipt,
        change_url=change,
        guidance=attention_guidance(receipt, request.user),
    )


# ------------------------------------------------------------ wipe a namespace
@_requires(WIPE_PERM, "Wipe a namespace")
def wipe_namespace_view(modeladmin, request):
    """The seed's ``wipe_all`` for one project (and user): a soft reset, not erasure."""
    form = WipeForm(request.POST if request.method == "POST" else None)
    title = "Wipe a namespace"
    common = {"title": title, "form": form, "namespaces": known_namespaces()}
    if request.method == "POST" and form.is_valid():
        project = form.cleaned_data["project"].strip()
        user = form.cleaned_data["user"].strip() or None
        names = {
            "project_label": namespace_label(project),
            "user_label": user,
            "project": project,
            # Not "user": the admin's templates show the signed-in user under that name.
            "user_namespace": user or "",
        }
        mm = MemoryManager(project=project, user=user)
        if not confirmed(request):
            found = mm.wipe_preview()  # what wipe_all below clears, counted by the same binding
            return _page(
                modeladmin,
                request,
                "memoryapp/admin/wipe_namespace.html",
                step="confirm",
                memories=found.memories,
                summaries=found.summaries,
                **names,
                **common,
            )
        result = mm.wipe_all(actor=actor(request))
        # Post/redirect/get: the result page is a GET, so reloading it shows the result
        # again instead of wiping again. The result waits in the session (not the URL,
        # which would put namespace names in access logs and browser history).
        token = _keep_wipe_result(request, {**names, **result.as_dict()})
        return HttpResponseRedirect(f"{request.path}?{WIPE_RESULT}={token}")
    if request.method == "GET" and WIPE_RESULT in request.GET:
        shown = request.session.get(WIPE_RESULTS_KEY, {}).get(request.GET[WIPE_RESULT])
        if shown is not None:
            return _page(
                modeladmin,
                request,
                "memoryapp/admin/wipe_namespace.html",
                step="result",
                result=shown,
                **{k: shown[k] for k in ("project_label", "user_label", "project")},
                **common,
            )
        common["gone"] = True  # another browser, or a session that has ended
    return _page(modeladmin, request, "memoryapp/admin/wipe_namespace.html", step="form", **common)


WIPE_RESULT = "result"
"""The query parameter naming a wipe's result on the page it redirects to."""
WIPE_RESULTS_KEY = "memoryapp_wipe_results"
KEPT_WIPE_RESULTS = 5  # per session: the last few wipes' pages stay reloadable


def _keep_wipe_result(request, result: dict) -> str:
    """Keep ``result`` in the session under a new random token; the oldest beyond a few go."""
    kept = dict(request.session.get(WIPE_RESULTS_KEY, {}))
    token = secrets.token_urlsafe(9)
    kept[token] = result
    request.session[WIPE_RESULTS_KEY] = dict(list(kept.items())[-KEPT_WIPE_RESULTS:])
    return token


# ------------------------------------------------------------------ export
@_requires(EXPORT_PERM, "Export a subject or namespace")
def export_view(modeladmin, request):
    """Download everything stored about a subject or namespace as one JSON document.

    A target that holds nothing (a mistyped key, most often) is a warning page
    first, as on the erase page; downloading it anyway is one more click. Every
    download writes an export record (``export(via="admin")``).
    """
    form = ExportForm(request.POST if request.method == "POST" else None)
    title = "Export a subject or namespace"
    if request.method == "POST" and form.is_valid():
        subject, namespace = form.cleaned_data["subject"], form.cleaned_data["namespace"]
        if not confirmed(request) and not _holds_anything(subject, namespace):
            return _page(
                modeladmin,
                request,
                "memoryapp/admin/export.html",
                title=title,
                form=form,
                step="empty",
                subject=subject,
                namespace=namespace,
                earlier_receipts=(lookup(subject).receipts.count() if subject is not None else 0),
            )
        try:
            document = export(
                subject=subject, namespace=namespace, actor=actor(request), via=ExportVia.ADMIN
            )
        except ErasureRequestError as exc:
            form.add_error(None, str(exc))
        else:
            label = slugify(subject or namespace or "default") or "default"
            return json_download(document, f"export-{label}-{now():%Y%m%d-%H%M%S}.json")
    return _page(
        modeladmin,
        request,
        "memoryapp/admin/export.html",
        title=title,
        form=form,
        step="form",
        namespaces=known_namespaces(),
    )


def _holds_anything(subject: str | None, namespace: str | None) -> bool:
    """True when an export of this target would list at least one stored row."""
    found = preview(subject=subject, namespace=namespace)
    if any(n for n in found["counts"].values() if isinstance(n, int)):
        return True
    return subject is not None and authored_count(subject, namespace=namespace) > 0


# ------------------------------------------------------------------ lookup
class LookupForm(forms.Form):
    """A subject key, typed to be looked up (posted, never in a URL; never stored)."""

    subject = forms.CharField(
        label="User key",
        max_length=255,
        strip=False,
        widget=forms.TextInput(attrs={"size": 40, "autocomplete": "off"}),
        help_text="Exactly as stored (e.g. acme/alice). Matched by keyed HMAC; not kept.",
    )

    def clean_subject(self):
        value = self.cleaned_data["subject"]
        if not value.strip():
            raise forms.ValidationError("Type a user key.")
        return value


def lookup_view(modeladmin, request):
    """Every erasure receipt and export record naming a subject key (found by HMAC).

    A POST form: the key travels in the body, so it reaches neither the URL, the
    browser history nor an access log, and the answer page is not cached.
    """
    if not can_lookup(request.user):
        return forbidden(modeladmin, request, perms.VIEW_ERASURERECEIPT, "Look up a user key")
    form = LookupForm(request.POST if request.method == "POST" else None)
    context: dict = {"title": "Look up a user key", "form": form}
    if request.method == "POST" and form.is_valid():
        found = lookup(form.cleaned_data["subject"])
        user = request.user
        context.update(
            searched=True,
            subject=form.cleaned_data["subject"],
            show_receipts=perms.can_see_receipts(user),
            show_exports=can_see_exports(user),
            receipts=[
                {"receipt": r, "summary": summarize(receipt_as_dict(r))} for r in found.receipts
            ]
            if perms.can_see_receipts(user)
            else [],
            exports=list(found.exports) if can_see_exports(user) else [],
        )
    response = _page(modeladmin, request, "memoryapp/admin/lookup.html", **context)
    response["Cache-Control"] = "no-store"
    return response


def can_see_exports(user) -> bool:
    """Export records are for whoever may export or read receipts."""
    return user.has_perm(EXPORT_PERM) or perms.can_see_receipts(user)


# ------------------------------------------------------------- print a receipt
def receipt_print_view(modeladmin, request, object_id: str):
    """The receipt for the data subject: the plain summary only, laid out for paper.

    It names no subject: the officer types the addressee on the page (kept in
    the browser, never sent back).
    """
    if not perms.can_see_receipts(request.user):
        return forbidden(modeladmin, request, perms.VIEW_ERASURERECEIPT, "Print a receipt")
    receipt = ErasureReceipt.objects.filter(pk=object_id).first()
    if receipt is None:
        raise Http404("No such receipt.")
    return _page(
        modeladmin,
        request,
        "memoryapp/admin/receipt_print.html",
        title="Confirmation of erasure",
        receipt=receipt,
        summary=summarize(receipt_as_dict(receipt)),
        printed=now(),
    )


# ------------------------------------------------------------- export records
@admin.register(ExportRecord)
class ExportRecordAdmin(ReadOnlyAdmin):
    """Who exported whose data, when, through which interface (read-only).

    The record names the subject and namespace by keyed HMAC only: to find a
    person's exports, use "Look up a user key".
    """

    list_display = ("created_at", "id_short", "target_kind", "via", "actor", "total_rows")
    list_filter = ("via", "target_kind", "limited_to_grants")
    search_fields = ("=id", "actor")
    search_help_text = "An exact record id, or part of an actor's name."
    ordering = ("-created_at", "id")
    change_list_template = "admin/memoryapp/exportrecord/change_list.html"
    fields = (
        "id",
        "created_at",
        "actor",
        "via",
        "target_kind",
        "limited_to_grants",
        "counts",
        "request_id",
        "subject_hmac",
        "namespace_hmac",
        "key_id",
    )

    def has_view_permission(self, request, obj=None):
        return can_see_exports(request.user)

    def changelist_view(self, request, extra_context=None):
        extra = {**links(request.user), **(extra_context or {})}
        return super().changelist_view(request, extra)

    @admin.display(description="id", ordering="id")
    def id_short(self, obj):
        return format_html('<code title="{}">{}</code>', obj.pk, obj.pk[:12])

    @admin.display(description="rows exported")
    def total_rows(self, obj):
        return f"{obj.total:,}"
