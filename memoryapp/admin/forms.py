"""The admin's forms: a memory (through the guard), and the compliance and purge requests."""

from __future__ import annotations

from typing import cast

from django import forms
from django.http import QueryDict

from memoryapp.admin.base import db_for
from memoryapp.admin.labels import namespace_label
from memoryapp.conf import get_guard
from memoryapp.models import Memory, MemoryType, ReviewItem, ReviewStatus, Scope, Source
from memoryapp.rules import validation
from memoryapp.rules.errors import MemoryValidationError, SensitiveMemoryError
from memoryapp.rules.validation import MAX_CONTENT_CHARS
from memoryapp.services import review_edit
from memoryapp.writes import store

ALL = "*"  # "every namespace" / "every status" in the purge form

SECRET_REFUSED = (
    "Refused: this looks like a credential (an API key, token, password or private key). "
    "Secrets are never stored in memory, so nothing was saved and the text was cleared "
    "from the form."
)


def _tags(text: str) -> list[str]:
    return [t.strip() for t in (text or "").split(",") if t.strip()]


class MemoryForm(forms.ModelForm):
    """Add or edit a memory through the same guard and classification as an upsert.

    The key is the key as given (it becomes the title; its normalised form is
    the identity). A credential in the key or content is refused; a key that
    would duplicate another live memory of the same namespace and scope is
    refused. ``self.prepared`` holds the guarded result for ``save_model``.
    """

    key = forms.CharField(
        label="Key",
        max_length=500,
        widget=forms.TextInput(attrs={"size": 60}),
        help_text="As written it becomes the title; lower-cased with “_” it is the key "
        "that identifies the memory in its namespace and scope.",
    )
    content = forms.CharField(
        label="Content",
        widget=forms.Textarea(attrs={"rows": 6, "cols": 80}),
        help_text=f"At most {MAX_CONTENT_CHARS:,} characters. Credentials are refused.",
    )
    tags = forms.CharField(
        label="Tags",
        required=False,
        help_text="Comma-separated, e.g. “preference, editor”.",
        widget=forms.TextInput(attrs={"size": 60}),
    )
    type = forms.ChoiceField(
        label="Type",
        required=False,
        choices=[("", "— infer from the tags —"), *MemoryType.choices],
    )
    namespace = forms.CharField(
        label="Namespace",
        required=False,
        help_text="The owner: a project key (project scope) or a user key (user scope). "
        "Empty is the default, single-tenant namespace.",
    )
    scope = forms.ChoiceField(
        label="Scope",
        required=False,
        choices=[("", "— infer from the key and tags —"), *Scope.choices],
    )
    subject = forms.CharField(
        label="Subject",
        required=False,
        help_text="Provenance: the user key in whose session this was written (optional).",
    )

    class Meta:
        model = Memory
        fields: tuple[str, ...] = ()

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.prepared: store.Prepared | None = None
        row = self.instance
        if row is not None and not row._state.adding:
            self.initial.setdefault("key", row.title)
            self.initial.setdefault("content", row.content)
            self.initial.setdefault("tags", ", ".join(row.tags))
            self.initial.setdefault("type", row.type)

    @property
    def adding(self) -> bool:
        return self.instance._state.adding

    def clean_namespace(self) -> str:
        return _namespace(self.cleaned_data.get("namespace") or "", "Namespace")

    def clean_subject(self) -> str:
        return _namespace(self.cleaned_data.get("subject") or "", "Subject")

    def clean(self):
        data = super().clean()
        if self.errors:
            return data
        row = self.instance
        key, content = data.get("key", ""), data.get("content", "")
        if self.adding:
            namespace = (data.get("namespace") or "").strip()
            scope, source = data.get("scope") or None, Source.EXPLICIT
        else:
            namespace, scope, source = row.namespace, row.scope, row.source
        guard = get_guard()
        try:
            prepared = store.prepare(
                guard,
                key,
                content,
                _tags(data.get("tags", "")),
                scope,
                data.get("type") or None,
                source,
            )
        except SensitiveMemoryError as exc:
            self._refuse_secret(exc.field)
            return data
        except MemoryValidationError as exc:
            self.add_error(_FORM_FIELD.get(exc.field or ""), str(exc))
            return data
        clash = (
            Memory.objects.using(db_for(Memory))
            .live()
            .filter(
                namespace=namespace, scope=prepared.scope, key_normalized=prepared.key_normalized
            )
        )
        if not self.adding:
            clash = clash.exclude(pk=row.pk)
        if clash.exists():
            self.add_error(
                "key",
                f"A live memory with the key “{prepared.key_normalized}” already exists in "
                f"{namespace_label(namespace)} ({prepared.scope} scope). Edit that memory "
                "instead, or delete it first.",
            )
            return data
        data["namespace"] = namespace
        self.prepared = prepared
        return data

    def _refuse_secret(self, field: str | None) -> None:
        """Name the refused field and never send the refused text back to the browser."""
        # The write path scans the content, then the key, then the tags, and names
        # the one that held the credential; a host guard that overrides ``check``
        # may not say, and then the tags are the last place it could have been.
        field = _FORM_FIELD.get(field or "") or "tags"
        # The stub says Mapping; a bound form's data is a QueryDict (or a dict): both copy.
        data = cast(QueryDict, self.data).copy()
        data[field] = ""
        self.data = data
        self.add_error(field, SECRET_REFUSED)


def _namespace(value: str, what: str) -> str:
    """A namespace or user key held to the write rules every entry point applies."""
    try:
        return validation.check_namespace(value, what)
    except MemoryValidationError as exc:
        raise forms.ValidationError(str(exc)) from None


# The form field of each input a refusal names (MemoryValidationError.field); an
# input the form does not show (the source) is reported on the whole form.
_FORM_FIELD = {"key": "key", "content": "content", "tags": "tags", "scope": "scope", "type": "type"}


# ------------------------------------------------------------ review queue
class PurgeForm(forms.Form):
    """Purge everything of one status (optionally one namespace)."""

    status = forms.ChoiceField(
        choices=[*ReviewStatus.choices, (ALL, "any status")],
        initial=ReviewStatus.REJECTED,
        help_text="Every review item with this status is removed for good.",
    )
    namespace = forms.ChoiceField(required=True, help_text="Limit the purge to one namespace.")

    def __init__(self, *args, namespaces=(), **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["namespace"].choices = [(ALL, "every namespace")] + [
            (f"ns:{ns}", namespace_label(ns)) for ns in namespaces
        ]

    def selection(self) -> tuple[str | None, str | None]:
        """``(status, namespace)``; None means any."""
        status = self.cleaned_data["status"]
        ns = self.cleaned_data["namespace"]
        return (None if status == ALL else status), (None if ns == ALL else ns[3:])


# ------------------------------------------------------------ compliance
class EraseSubjectForm(forms.Form):
    """The user key whose data is erased."""

    subject = forms.CharField(
        label="User key",
        max_length=255,
        help_text="The user key exactly as the agents use it, e.g. “acme/alice”.",
        widget=forms.TextInput(attrs={"size": 40, "autofocus": True, "autocomplete": "off"}),
    )
    include_authored = forms.BooleanField(
        label="Also erase the project memories this user wrote",
        required=False,
        help_text="Project-scope memories are the project's knowledge; by default they are "
        "kept (the receipt says how many).",
    )

    def clean_subject(self):
        value = self.cleaned_data["subject"].strip()
        if not value:
            raise forms.ValidationError("Enter the user key.")
        return value


class WipeForm(forms.Form):
    """The namespaces a ``wipe_all`` resets."""

    project = forms.CharField(
        label="Project namespace",
        required=False,
        max_length=255,
        help_text="Leave empty for the default (single-tenant) namespace.",
        widget=forms.TextInput(attrs={"size": 40, "list": "known-namespaces"}),
    )
    user = forms.CharField(
        label="User key (optional)",
        required=False,
        max_length=255,
        help_text="Also clears this user's user-scope memories.",
        widget=forms.TextInput(attrs={"size": 40, "list": "known-namespaces"}),
    )


class ExportForm(forms.Form):
    """A subject, a namespace, or both (the subject's rows in that namespace)."""

    subject = forms.CharField(
        label="User key",
        required=False,
        max_length=255,
        widget=forms.TextInput(attrs={"size": 40}),
        help_text="Everything stored about this user (GDPR access / portability).",
    )
    namespace = forms.CharField(
        label="Namespace",
        required=False,
        max_length=255,
        widget=forms.TextInput(attrs={"size": 40, "list": "known-namespaces"}),
        help_text="Every row of this namespace; with a user key, only that user's rows in it.",
    )
    default_namespace = forms.BooleanField(
        label="The default (empty) namespace",
        required=False,
        help_text="Tick to export the single-tenant namespace, whose name is empty.",
    )

    def clean(self):
        data = super().clean()
        subject = (data.get("subject") or "").strip() or None
        namespace = (data.get("namespace") or "").strip() or None
        if data.get("default_namespace"):
            if namespace is not None:
                raise forms.ValidationError("Give a namespace or tick the default one, not both.")
            namespace = ""
        if subject is None and namespace is None:
            raise forms.ValidationError("Give a user key, a namespace, or both.")
        data["subject"], data["namespace"] = subject, namespace
        return data


class ReviewItemForm(forms.ModelForm):
    """A reviewer's correction of a pending item (title, content, type, scope).

    Checked here by the service's own rules (the guard, the choices, a collision
    with another pending item), so a refusal shows on its field; the admin saves
    through :func:`memoryapp.services.review_edit.edit`, never ``Model.save``.
    """

    class Meta:
        model = ReviewItem
        fields = review_edit.EDITABLE
        widgets = {"content": forms.Textarea(attrs={"rows": 4})}

    corrections: dict[str, str]

    def clean(self):
        cleaned = super().clean()
        changes = {
            name: cleaned[name]
            for name in self.changed_data
            if name in review_edit.EDITABLE and name in cleaned
        }
        self.corrections = {}
        try:
            self.corrections = review_edit.clean(changes)
        except (MemoryValidationError, SensitiveMemoryError) as exc:
            field = exc.field if exc.field in self.fields else None
            self.add_error(field, str(exc) or "This looks like a credential; it is not stored.")
            return cleaned
        # The instance is still the stored item here (the ModelForm copies the posted
        # values into it only after clean()).
        if self.instance.pk and review_edit.collides(self.instance, self.corrections):
            self.add_error(
                "scope" if "scope" in self.corrections else "type",
                "Another pending item has this scope and key: approve or reject it first.",
            )
        return cleaned
