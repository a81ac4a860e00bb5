"""``memory client NAME --grant PREFIX … [--write] [--erase]``: provision an API client;
``memory client --user USERNAME``: a token for an existing staff account.

The API is an optional sub-package; this verb imports it only when it runs.
"""

from __future__ import annotations

from django.apps import apps
from django.core.management.base import CommandError


def register(verbs, common) -> dict:
    """Add the ``client`` verb to the parser; return its handler."""
    p = verbs.add_parser(
        "client",
        help="create or update a non-staff API client with namespace grants, or (--user) "
        "give a staff account a token; print a new token once (only its hash is stored)",
    )
    p.add_argument("name", nargs="?", help="the client's user name (a non-staff account)")
    p.add_argument(
        "--grant",
        action="append",
        default=[],
        metavar="NAMESPACE",
        help="an exact namespace, or a prefix ending in '/' (repeatable); read is always granted",
    )
    p.add_argument(
        "--user",
        metavar="USERNAME",
        help="instead of a client: a token for this existing staff account, whose model "
        "permissions decide what the API lets it do (e.g. the compliance officer and the "
        "subject-request endpoints)",
    )
    p.add_argument("--revoke", action="store_true", help="with --user: revoke the account's tokens")
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
    if options.get("user") is not None:
        _staff(cmd, options)
        return
    _require_client_arguments(options)
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


def _require_client_arguments(options) -> None:
    """A client needs NAME and --grant; --revoke is for staff accounts only."""
    if options.get("revoke"):
        raise CommandError("--revoke goes with --user (a client's tokens: --rotate)")
    if not options.get("name") or not options["grant"]:
        raise CommandError("give NAME --grant NAMESPACE (a client), or --user USERNAME (staff)")


def _staff(cmd, options) -> None:
    """``--user USERNAME``: a token for a staff account (no grants: its permissions decide)."""
    if options.get("name") or options["grant"] or options["write"] or options["erase"]:
        raise CommandError(
            "--user takes no NAME, --grant, --write or --erase: a staff account's "
            "model permissions decide what its token may do"
        )
    from memoryapp.api.grants import ClientError, staff_token

    try:
        issued = staff_token(options["user"], rotate=options["rotate"], revoke=options["revoke"])
    except ClientError as exc:
        raise CommandError(str(exc)) from exc
    name = options["user"]
    if issued.revoked:
        cmd.stdout.write(f"Revoked {issued.revoked} token(s) of staff account {name!r}.")
    if issued.token is None:
        if issued.prefixes:
            prefixes = ", ".join(f"{p}…" for p in issued.prefixes)
            cmd.stdout.write(
                f"Token unchanged ({prefixes}): it cannot be shown again; --rotate issues a "
                "new one."
            )
        return
    cmd.stdout.write(
        f"Token for staff account {name!r} (its model permissions apply; shown once, only "
        "its hash is stored):"
    )
    cmd.stdout.write(issued.token)
