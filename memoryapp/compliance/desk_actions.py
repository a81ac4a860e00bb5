"""The compliance desk's actions on a data-subject request: one table for every interface.

Each action has a name (the admin's ``act/<name>/`` URL, the API's ``act`` value or
endpoint), the label the desk shows, the model permissions it needs beyond changing
requests, and the service function of :mod:`memoryapp.compliance.desk` that performs
it. The admin's action pages and ``/api/subject-requests/`` iterate this table instead of
each listing the actions; they and ``manage.py memory requests`` run each action through
the service it names. What an interface adds is only how it asks and answers.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

from memoryapp import permissions as perms
from memoryapp.compliance import desk


@dataclass(frozen=True)
class DeskAction:
    """One action of the desk.

    Attributes:
        name: its key, in URLs and request bodies.
        label: what the desk calls it ("Extend the deadline").
        service: the service function that performs it (its first argument the request).
        needs: model permissions it needs beyond changing requests (export, erase).
        separate: a step with a permission of its own (export, erase): the API serves it
            at its own URL rather than as an ``act`` value.
    """

    name: str
    label: str
    service: Callable[..., Any]
    needs: tuple[str, ...] = ()
    separate: bool = False


DESK_ACTIONS: tuple[DeskAction, ...] = (
    DeskAction("start", "Start", desk.start),
    DeskAction("assign", "Assign", desk.assign),
    DeskAction("extend", "Extend the deadline", desk.extend),
    DeskAction("note", "Add a note", desk.add_note),
    DeskAction(
        "export",
        "Export the subject's data",
        desk.export_for,
        (perms.EXPORT_MEMORY,),
        separate=True,
    ),
    DeskAction(
        "erase",
        "Erase the subject's data",
        desk.erase_for,
        (perms.ERASE_MEMORY,),
        separate=True,
    ),
    # Closing drops the subject key; answering and refusing differ only in the outcome.
    DeskAction("answer", "Answer and close", partial(desk.close, refused=False)),
    DeskAction("refuse", "Refuse and close", partial(desk.close, refused=True)),
)

BY_NAME: dict[str, DeskAction] = {action.name: action for action in DESK_ACTIONS}


def desk_action(name: str) -> DeskAction:
    """The action called ``name`` (``KeyError`` for one the desk does not have)."""
    return BY_NAME[name]
