"""The erasure pages: erase a subject, retry an unfinished erasure, print a receipt, and the
needs-attention banners of the overview and the receipt page."""

from __future__ import annotations

from django.contrib import messages
from django.http import Http404, HttpResponseRedirect
from django.urls import reverse

from memoryapp import conf
from memoryapp import permissions as perms
from memoryapp.admin.base import actor
from memoryapp.admin.compliance import ERASE_PERM, links, page, requires
from memoryapp.admin.confirm import confirmed
from memoryapp.admin.forms import EraseSubjectForm
from memoryapp.admin.labels import count_rows
from memoryapp.admin.responses import forbidden
from memoryapp.compliance import (
    ErasureRequestError,
    ReceiptInProgress,
    attention,
    authored_count,
    desk_scope,
    erase,
    outcome_words,
    preview,
    purge_now,
    receipt_as_dict,
    retry_purge,
)
from memoryapp.compliance.holdings import desk_reach
from memoryapp.conf import PURGE_METHODS
from memoryapp.fields import now
from memoryapp.models import ErasureReceipt, ReceiptState
from memoryapp.rules.receipt_text import summarize
from memoryapp.rules.wording import plural


@requires(ERASE_PERM, "Erase a subject")
def erase_subject_view(modeladmin, request):
    """Form → confirmation with the counts per table → erasure → the receipt."""
    form = EraseSubjectForm(request.POST if request.method == "POST" else None)
    title = "Erase a subject"
    if request.method == "POST" and form.is_valid():
        subject = form.cleaned_data["subject"]
        include = form.cleaned_data["include_authored"]
        if not desk_scope.may_handle_keys(request.user, subject):
            # A tenant-scoped officer erases the keys of their tenants only.
            form.add_error("subject", desk_scope.outside_desk(request.user, "key"))
        elif not confirmed(request):
            # In their tenants' namespaces only (None: every one), as the erasure below.
            reach = desk_reach(request.user, subject)
            found = preview(subject=subject, include_authored=include, grants=reach)
            counts = count_rows(found["counts"])
            return page(
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
                authored=authored_count(subject, grants=reach),
            )
        else:
            try:
                receipt = erase(
                    subject=subject,
                    include_authored=include,
                    actor=actor(request),
                    purge=purge_now(),
                    grants=desk_reach(request.user, subject),
                )
            except ErasureRequestError as exc:
                form.add_error("subject", str(exc))
            else:
                modeladmin.message_user(request, erased_message(receipt), messages.SUCCESS)
                return HttpResponseRedirect(
                    reverse("admin:memoryapp_erasurereceipt_change", args=[receipt.pk])
                )
    return page(
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
    """The overview's banner: erasures a person must look at (None when there are none);
    a tenant-scoped officer's counts and list are those of their tenants' receipts."""
    mine = desk_scope.visible_records(user, ErasureReceipt.objects.all())
    found = attention.status(receipts=mine)
    if not found.problems:
        return None
    receipts = list(attention.needing_attention(receipts=mine)[:5])
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
            text = f"The erasure is complete: {outcome_words(done)}."
            level = messages.SUCCESS
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
    return page(
        modeladmin,
        request,
        "memoryapp/admin/retry_receipt.html",
        title="Retry an erasure",
        receipt=receipt,
        change_url=change,
        guidance=attention_guidance(receipt, request.user),
    )


def receipt_print_view(modeladmin, request, object_id: str):
    """The receipt for the data subject: the plain summary only, laid out for paper.

    It names no subject: the officer types the addressee on the page (kept in
    the browser, never sent back).
    """
    if not perms.can_see_receipts(request.user):
        return forbidden(modeladmin, request, perms.VIEW_ERASURERECEIPT, "Print a receipt")
    receipt = desk_scope.visible_records(request.user, ErasureReceipt.objects).filter(pk=object_id)
    receipt = receipt.first()
    if receipt is None:
        raise Http404("No such receipt.")
    return page(
        modeladmin,
        request,
        "memoryapp/admin/receipt_print.html",
        title="Confirmation of erasure",
        receipt=receipt,
        summary=summarize(receipt_as_dict(receipt)),
        printed=now(),
    )
