"""A closed request keeps no form of its subject key (issue #39): notes, reasons, the
outcome and the history, whatever form the key was typed in."""

from __future__ import annotations

import pytest

from memoryapp.compliance import desk
from memoryapp.models import SubjectRequest, SubjectRequestEvent
from memoryapp.rules.key_scrub import normal_form

pytestmark = pytest.mark.django_db

KEY = "acme/alice"
FORMS = (
    "acme%2Falice",
    "ａｃｍｅ／ａｌｉｃｅ",
    "acme/\u00a0alice",
    "ac\u200bme/alice",
    "ACME / Alice",
)


def test_no_form_of_the_key_is_left_once_closed():
    made = desk.open_request(
        subject=KEY, right="erasure", actor="dpo", notes=f"mail from {FORMS[0]}"
    )
    desk.add_note(made, f"phoned {FORMS[1]}", actor="dpo")
    desk.extend(made, 1, f"{FORMS[2]} sent more documents", actor="dpo")
    desk.close(made, refused=False, outcome=f"told {FORMS[3]} and {FORMS[4]}", actor="dpo")
    row = SubjectRequest.objects.get(pk=made.pk)
    texts = [row.notes, row.extension_reason, row.outcome, row.created_by]
    texts += [e.detail for e in SubjectRequestEvent.objects.filter(request=row)]
    assert row.sealed is None
    assert all(normal_form(KEY) not in normal_form(t) for t in texts), texts
    assert "(the subject)" in row.notes and "(the subject)" in row.outcome
