"""Admin login throttling (django-axes), as this project wires it.

Failed logins are counted per account and per client address; past
``AXES_FAILURE_LIMIT`` failures within ``AXES_COOLOFF_TIME`` the account, or the
address, is refused (429) until the cool-off ends or staff delete the lock (the
admin's "Access attempts" page, or ``manage.py axes_reset``).
"""

from __future__ import annotations

from axes.backends import AxesStandaloneBackend
from django.conf import settings


class LoginThrottleBackend(AxesStandaloneBackend):
    """Axes' lockout check, for logins that arrive with a request.

    Every login over HTTP does (the admin's form passes its request). A call from
    code without one — the test client's ``login()``, a shell — has no address
    to count and no attacker behind it, so it is passed on to the next backend
    instead of failing as axes' own class does.
    """

    def authenticate(self, request, username=None, password=None, **kwargs):
        if request is None:
            return None
        return super().authenticate(request, username, password, **kwargs)


def client_address(request) -> str | None:
    """The address a login came from, as far as this deployment can trust it.

    Behind a proxy (``BEHIND_PROXY``) the proxy's own address is every client's
    ``REMOTE_ADDR``; the client is the last ``X-Forwarded-For`` entry, the one the
    proxy appended (the entries before it are whatever the client sent, so
    trusting the first one would let an attacker pick a fresh address per try).
    """
    if getattr(settings, "BEHIND_PROXY", False):
        forwarded = request.META.get("HTTP_X_FORWARDED_FOR", "")
        hops = [hop.strip() for hop in forwarded.split(",") if hop.strip()]
        if hops:
            return hops[-1]
    return request.META.get("REMOTE_ADDR")
