"""Create the first admin account for ``make run`` / ``make serve`` and print how to log in."""

from __future__ import annotations

import os
import secrets

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError
from django.urls import reverse

DEFAULT_BIND = "127.0.0.1:8000"
# Addresses a server listens on to accept every interface: a browser on this machine
# reaches it on loopback (the URL printed), others on the host's own name.
_ANY_V4 = "0.0.0.0"
_ANY_V6 = "::"


def login_url(bind: str, path: str = "/admin/") -> str:
    """The URL of ``path`` on a server bound to ``bind`` (gunicorn's/runserver's form).

    ``HOST:PORT``, ``[V6]:PORT``, a bare ``HOST`` (gunicorn's port 8000) or a bare
    ``PORT`` (runserver's 127.0.0.1). A wildcard host becomes loopback, which the
    server also answers on. A Unix socket or a file descriptor has no URL: the
    answer names the socket instead. Raises ``ValueError`` for a malformed bind.
    """
    bind = bind.strip()
    if bind.startswith(("unix:", "fd://")):
        return f"{path} through {bind}"
    if bind.isdigit():
        host, port = "127.0.0.1", bind
    elif bind.startswith("["):
        end = bind.find("]")
        if end < 0:
            raise ValueError("unclosed '[' in the address")
        host, rest = bind[1:end], bind[end + 1 :]
        if rest and not rest.startswith(":"):
            raise ValueError("expected ':PORT' after the IPv6 address")
        port = rest[1:] or "8000"
    elif bind.count(":") == 1:
        host, port = bind.split(":")
    elif ":" in bind:  # an IPv6 address without brackets and so without a port
        host, port = bind, "8000"
    else:
        host, port = bind, "8000"
    if not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError("the port is not a number from 1 to 65535")
    if host in ("", _ANY_V4):
        host = "127.0.0.1"
    elif host == _ANY_V6:
        host = "::1"
    if ":" in host:
        host = f"[{host}]"
    return f"http://{host}:{port}{path}"


class Command(BaseCommand):
    """Create a superuser once; take ``ADMIN_USERNAME``/``ADMIN_PASSWORD`` from the environment."""

    help = (
        "Create the admin account on first run (ADMIN_USERNAME / ADMIN_PASSWORD from the "
        "environment, else 'admin' with a generated password kept in var/admin-password.txt), "
        "and print where to log in."
    )

    def add_arguments(self, parser) -> None:
        parser.add_argument(
            "--bind",
            default=DEFAULT_BIND,
            help=(
                "the address the server listens on, as given to gunicorn or runserver "
                "(HOST:PORT, [V6]:PORT, unix:PATH); the login URL names it "
                f"(default {DEFAULT_BIND})"
            ),
        )

    def handle(self, *args, **options) -> None:
        try:
            where = login_url(options["bind"], reverse("admin:index"))
        except ValueError as exc:
            raise CommandError(f"--bind: {exc}") from None
        User = get_user_model()
        username = os.environ.get("ADMIN_USERNAME") or "admin"
        password = os.environ.get("ADMIN_PASSWORD") or ""
        secret_file = settings.VAR_DIR / "admin-password.txt"
        user = User.objects.filter(username=username).first()
        if user is None:
            if not password:
                password = secrets.token_urlsafe(12)
                settings.VAR_DIR.mkdir(exist_ok=True)
                secret_file.write_text(password + "\n")
                secret_file.chmod(0o600)
            User.objects.create_superuser(username=username, email="", password=password)
            self.stdout.write(self.style.SUCCESS(f"Created the admin account {username!r}."))
        elif password:
            user.set_password(password)
            user.save(update_fields=["password"])
        if not password and secret_file.exists():
            password = secret_file.read_text().strip()
        shown = password or "(the password you set earlier)"
        self.stdout.write(f"Log in at {where} as {username!r} with password: {shown}")
