"""``memory client NAME --grant PREFIX … [--write] [--erase]``: provision an API client.

The API is an optional sub-package; this verb imports it only when it runs.
"""

from __future__ import annotations

from django.apps import apps
from django.core.management.base import CommandError


def register(verbs, common) -> dict:
    """Add the ``client`` verb to the parser; return its handler."""
    p = verbs.add_parser(
        "client",
        help="create or update a non-staff API client with namespace grants; print a new "
        "token once (only its hash is stored)",
    )
    p.add_argument("name", help="the client's user name")
    p.add_argument(
        "--grant",
        action="append",
        default=[],
        metavar="NAMESPACE",
        required=True,
        help="an exact namespace, or a prefix ending in '/' (repeatable); read is always granted",
    )
    p.add_argument("--write", action="store_true", help="also grant write")
    p.add_argument("--erase", action="store_true", help="also grant erase, purge and wipe")
    p.add_argument(
        "--rotate", action="store_true", help="revoke the client's tokens and print a new one"
    )
    return {"client": do_client}


def do_client(cmd, options) -> None:
    """Provision the client; when a token is issued, the last line is the token alone.

    The token is printed this once: only its hash is stored. A client that already
    has a token keeps it, and the output names its prefix instead.
    """
    if not apps.is_installed("memoryapp.api"):
        raise CommandError("The API is not installed: add 'memoryapp.api' to INSTALLED_APPS.")
    from memoryapp.api.grants import ClientError, provision_client

    try:
        client = provision_client(
            options["name"],
            options["grant"],
            write=options["write"],
            erase=options["erase"],
            rotate=options["rotate"],
        )
    except ClientError as exc:
        raise CommandError(str(exc)) from exc
    verb = "Created" if client.created else "Updated"
    cmd.stdout.write(f"{verb} API client {options['name']!r}.")
    for grant in client.grants:
        rights = ", ".join(r for r, on in grant.rights().items() if on)
        cmd.stdout.write(f"  grant {grant.namespace or '(default)'}: {rights}")
    for ns in client.removed:
        cmd.stdout.write(f"  removed grant {ns or '(default)'}")
    if client.token is None:
        from memoryapp.api.models import ApiToken

        tokens = ApiToken.objects.filter(user_id=client.user.pk)
        prefixes = ", ".join(f"{prefix}…" for prefix in tokens.values_list("prefix", flat=True))
        cmd.stdout.write(
            f"Token unchanged ({prefixes}): it cannot be shown again; --rotate issues a new one."
        )
        return
    cmd.stdout.write("Token (shown once, only its hash is stored):")
    cmd.stdout.write(client.token)
