"""The desk's staff, defined once: each fixture is the user ``dpo``, signed in to the admin
(or, for ``api_officer``, holding an API token), and they differ in how the account holds
its rights — the names say how."""

from __future__ import annotations

import pytest

from tests._admin_support import DESK_PERMS, REQUEST_HANDLER_PERMS, client_for, make_staff
from tests.factories import make_officer, make_staff_api


@pytest.fixture
def dpo():
    """A compliance officer at the desk by direct permissions (``DESK_PERMS``): requests,
    export, erasure and their proofs; not in the Compliance group."""
    return make_staff("dpo", DESK_PERMS)


@pytest.fixture
def officer(dpo):
    """``dpo`` signed in to the admin."""
    return client_for(dpo)


@pytest.fixture
def request_handler():
    """Someone who records and answers requests (``REQUEST_HANDLER_PERMS``) and may neither
    export nor erase, signed in to the admin."""
    return client_for(make_staff("dpo", REQUEST_HANDLER_PERMS))


@pytest.fixture
def group_officer():
    """A member of the Compliance group (its rights from the group only, no desk grant),
    signed in to the admin."""
    return client_for(make_officer("dpo"))


@pytest.fixture
def api_officer():
    """A member of the Compliance group (no desk grant) over the API: a staff token client."""
    return make_staff_api("dpo", compliance=True)
