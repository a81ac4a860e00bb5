"""Look a user key up: every erasure receipt and export record naming it (found by HMAC)."""

from __future__ import annotations

from django import forms

from memoryapp import permissions as perms
from memoryapp.admin.compliance import can_lookup, can_see_exports, page
from memoryapp.admin.responses import forbidden
from memoryapp.compliance import receipt_as_dict
from memoryapp.compliance.lookup import lookup
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
    response = page(modeladmin, request, "memoryapp/admin/lookup.html", **context)
    response["Cache-Control"] = "no-store"
    return response
