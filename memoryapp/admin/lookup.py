"""Look a user key up: every erasure receipt, export record and request naming it (by HMAC)."""

from __future__ import annotations

from django import forms

from memoryapp import permissions as perms
from memoryapp.admin.compliance import can_lookup, can_see_exports, page
from memoryapp.admin.responses import forbidden
from memoryapp.compliance import receipt_as_dict
from memoryapp.compliance.desk import urgency
from memoryapp.compliance.desk_scope import visible_records, visible_requests
from memoryapp.compliance.lookup import lookup
from memoryapp.models import ErasureReceipt, ExportRecord, SubjectRequest
from memoryapp.rules.receipt_text import summarize


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


# An open request's urgency as the page's badge tones (admin.css) and words.
URGENCY_BADGE = {"overdue": ("problem", "overdue"), "due_soon": ("pending", "due this week")}


def can_see_requests(user) -> bool:
    """Data-subject requests are listed to whoever may view them (the compliance role)."""
    return user.has_perm(perms.VIEW_SUBJECTREQUEST)


def request_rows(found) -> list[dict]:
    """The found requests, each with its urgency badge (tone, words) when open and due soon."""
    rows = []
    for subject_request in found:
        tone, words = URGENCY_BADGE.get(urgency(subject_request), ("", ""))
        rows.append({"request": subject_request, "tone": tone, "urgency": words})
    return rows


def lookup_view(modeladmin, request):
    """Every erasure receipt, export record and subject request naming a key (by HMAC).

    Each part is listed only to a user who may see it; requests to those holding
    ``view_subjectrequest``, linked to their change pages.

    A POST form: the key travels in the body, so it reaches neither the URL, the
    browser history nor an access log, and the answer page is not cached.
    """
    if not can_lookup(request.user):
        return forbidden(modeladmin, request, perms.VIEW_ERASURERECEIPT, "Look up a user key")
    form = LookupForm(request.POST if request.method == "POST" else None)
    context: dict = {"title": "Look up a user key", "form": form}
    if request.method == "POST" and form.is_valid():
        user = request.user
        found = lookup(
            form.cleaned_data["subject"],
            receipts=visible_records(user, ErasureReceipt.objects.all()),
            exports=visible_records(user, ExportRecord.objects.all()),
            requests=visible_requests(user)
            if can_see_requests(user)
            else SubjectRequest.objects.none(),
        )
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
            show_requests=can_see_requests(user),
            requests=request_rows(found.requests),
        )
    response = page(modeladmin, request, "memoryapp/admin/lookup.html", **context)
    response["Cache-Control"] = "no-store"
    return response
