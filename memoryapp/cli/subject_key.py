"""Reading a subject key (a person's user key, personal data) without putting it in argv.

A key typed as an argument stays in shell history and shows in ``ps``: the commands
that name a person read it from one line of standard input (``--subject-stdin``) or
ask for it at an unechoed prompt.
"""

from __future__ import annotations

import getpass
import sys

from django.core.management import CommandError

STDIN_HELP = "read the user key from one line of standard input (keeps it out of shell history)"


def read_subject(options) -> str:
    """The subject key: one line of standard input with ``--subject-stdin``, else typed
    at an unechoed prompt. Never from argv."""
    if options.get("subject_stdin"):
        key = sys.stdin.readline().rstrip("\r\n")
    else:
        key = getpass.getpass("Subject key (not echoed): ")
    if not key.strip():
        raise CommandError("a subject key is needed (--subject-stdin, or typed when asked)")
    return key


def subject_from_stdin(options) -> None:
    """With ``--subject-stdin``, read the key into ``options["subject"]`` (never beside
    ``--subject``)."""
    if not options.get("subject_stdin"):
        return
    if options.get("subject") is not None:
        raise CommandError("give the user key once: --subject or --subject-stdin, not both")
    options["subject"] = read_subject(options)
