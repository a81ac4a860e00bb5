"""The erasure receipts a client may list, and the lookup of a user key's records.

Which receipts and export records a client sees follows who asked for them: staff
holding the rule see all (a tenant-scoped officer: those of the tenants their desk
grants cover), anyone else those of the erasures they asked for.
Data-subject requests carry no namespace: the lookup lists them only to staff
holding the request view permission; for anyone else ``requests`` is an empty
list (the key is always there, so the answer has one shape).
"""

from __future__ import annotations

import datetime as dt

import django_filters
from rest_framework import serializers

from memoryapp import permissions as perms
from memoryapp.api import permissions
from memoryapp.api.filters import StrictChoiceFilter
from memoryapp.api.models import ErasureRequest
from memoryapp.api.patterns import NON_BLANK_PATTERN
from memoryapp.api.permissions import READ, Access, Rule
from memoryapp.api.serializers.erasures import ReceiptSerializer
from memoryapp.api.serializers.fields import NAMESPACE_MAX, StrictCharField
from memoryapp.api.serializers.strict import StrictInput
from memoryapp.compliance import desk_scope
from memoryapp.compliance.desk import urgency
from memoryapp.compliance.lookup import lookup
from memoryapp.models import (
    ErasureReceipt,
    ErasureTarget,
    ExportRecord,
    ExportVia,
    ReceiptState,
    SubjectRequest,
)

# Reading data-subject requests (here, not in api.permissions: the lookup and
# /api/subject-requests/ share it). Requests carry no namespace: staff only.
REQUEST_READ = Rule(READ, (perms.VIEW_SUBJECTREQUEST,))


class UtcDateTimeFilter(django_filters.IsoDateTimeFilter):
    """An ISO 8601 bound, compared in UTC.

    Python takes offsets up to ±23:59, PostgreSQL up to ±15:59: the bound goes to the
    database in UTC. A bound that leaves the calendar in UTC (year 1 at a negative
    offset, year 9999 at a positive one) is the calendar's own end.
    """

    def filter(self, qs, value):
        if value is not None:
            try:
                value = value.astimezone(dt.UTC)
            except OverflowError:
                end = dt.datetime.min if value.year < 5000 else dt.datetime.max
                value = end.replace(tzinfo=dt.UTC)
        return super().filter(qs, value)


class ReceiptFilter(django_filters.FilterSet):
    """``GET /api/erasures/``: by state and creation time (inclusive bounds, ISO 8601)."""

    state = StrictChoiceFilter(choices=ReceiptState.choices)
    target_kind = StrictChoiceFilter(choices=ErasureTarget.choices)
    created_after = UtcDateTimeFilter(
        field_name="created_at", lookup_expr="gte", label="Created at or after (ISO 8601)."
    )
    created_before = UtcDateTimeFilter(
        field_name="created_at", lookup_expr="lte", label="Created at or before (ISO 8601)."
    )

    class Meta:
        model = ErasureReceipt
        fields = ("state", "target_kind", "created_after", "created_before")

    def is_valid(self) -> bool:
        """Also refuse an empty value (``?state=``, ``?created_before=``): django-filter
        would ignore it, and the schema's enum and date-time format do not take ``""``."""
        valid = super().is_valid()
        for name in self.base_filters:
            if self.data.get(name) == "":
                self.form.add_error(name, "An empty value is not one this filter takes.")
                valid = False
        return valid


def visible_receipts(access: Access, rule: permissions.Rule):
    """The receipts a client may read: all for staff holding ``rule``, else those of the
    erasures it asked for (as :func:`authorize_receipt` decides for one receipt)."""
    receipts = ErasureReceipt.objects.order_by("-created_at", "id")
    if access.is_global(rule):
        return desk_scope.visible_records(access.user, receipts)
    mine = ErasureRequest.objects.filter(user=access.user).exclude(receipt_id="")
    return receipts.filter(pk__in=mine.values("receipt_id"))


def visible_exports(access: Access):
    """The export records a client may read: all for staff who may export everywhere,
    else its own API exports — by account, never by name: a deleted client's records
    lose their account and go to no later client reusing its name."""
    records = ExportRecord.objects.order_by("-created_at", "id")
    if access.is_global(permissions.EXPORT):
        return desk_scope.visible_records(access.user, records)
    if access.user is None or access.user.pk is None:
        return records.none()
    return records.filter(user=access.user, via=ExportVia.API)


def visible_requests(access: Access):
    """The data-subject requests a client may read: for staff holding the request view
    permission, those of the tenants their desk grants cover (no grant: all); none for
    anyone else (API clients' namespace grants do not reach the desk)."""
    if access.is_global(REQUEST_READ):
        return desk_scope.visible_requests(access.user)
    return SubjectRequest.objects.none()


class LookupInputSerializer(StrictInput):
    """``POST /api/erasures/lookup/``: the subject key, in the body (never in a URL)."""

    subject = StrictCharField(
        max_length=NAMESPACE_MAX,
        trim_whitespace=False,
        schema_pattern=NON_BLANK_PATTERN,
        help_text="A subject (user) key, exactly as stored. Matched by keyed HMAC; not stored.",
    )

    def validate_subject(self, value: str) -> str:
        if not value.strip():
            raise serializers.ValidationError("A subject is a non-empty user key.")
        return value


class ExportRecordSerializer(serializers.ModelSerializer):
    """The audit record of one export: who, when, through what, how many rows (no key)."""

    counts = serializers.DictField(child=serializers.IntegerField(), help_text="Rows per part.")

    class Meta:
        model = ExportRecord
        fields = (
            "id",
            "actor",
            "via",
            "target_kind",
            "subject_hmac",
            "namespace_hmac",
            "key_id",
            "limited_to_grants",
            "counts",
            "request_id",
            "created_at",
        )
        read_only_fields = fields


class RequestFoundSerializer(serializers.ModelSerializer):
    """A data-subject request as a lookup lists it: its facts, never the key (details and
    history: ``GET /api/subject-requests/{id}/``)."""

    assignee: serializers.SlugRelatedField = serializers.SlugRelatedField(
        slug_field="username",
        read_only=True,
        allow_null=True,
        help_text="Username; null when unassigned.",
    )
    urgency = serializers.SerializerMethodField()

    class Meta:
        model = SubjectRequest
        fields = (
            "id",
            "right",
            "status",
            "received_on",
            "due_on",
            "urgency",
            "assignee",
            "closed_at",
        )
        read_only_fields = fields

    def get_urgency(self, obj: SubjectRequest) -> str:
        """``overdue``, ``due_soon`` or ``""`` (always ``""`` once closed)."""
        return urgency(obj)


class LookupOutputSerializer(serializers.Serializer):
    """What a lookup found: receipts and export records naming the key (oldest first) and
    the requests for it (by received date; empty unless the client may view requests)."""

    receipts = ReceiptSerializer(many=True)
    exports = ExportRecordSerializer(many=True)
    requests = RequestFoundSerializer(
        many=True,
        help_text="Open and closed data-subject requests naming the key; always empty "
        "for a client without the subject-request view permission (staff only).",
    )


def lookup_body(data: dict, access: Access, rule: permissions.Rule) -> dict:
    """The receipts, export records and requests naming ``data["subject"]`` that the
    client may read."""
    found = lookup(
        data["subject"],
        receipts=visible_receipts(access, rule),
        exports=visible_exports(access),
        requests=visible_requests(access),
    )
    return {
        "receipts": ReceiptSerializer(found.receipts, many=True).data,
        "exports": ExportRecordSerializer(found.exports, many=True).data,
        "requests": RequestFoundSerializer(found.requests, many=True).data,
    }
