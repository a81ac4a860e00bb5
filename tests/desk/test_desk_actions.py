"""One registry of the desk's actions (memoryapp.compliance.desk_actions): the admin, the API
and the command line take their actions, labels, permissions and services from it."""

from __future__ import annotations

from functools import partial
from pathlib import Path

from memoryapp import permissions as perms
from memoryapp.admin import desk_actions as admin_desk
from memoryapp.api import permissions as api_permissions
from memoryapp.api.serializers.subject_requests import ActSerializer
from memoryapp.api.views.subject_requests import SubjectRequestViewSet
from memoryapp.cli import requests as cli_requests
from memoryapp.compliance import desk
from memoryapp.compliance.desk_actions import BY_NAME, DESK_ACTIONS, desk_action

NAMES = ("start", "assign", "extend", "note", "export", "erase", "answer", "refuse")


def test_the_registry_names_each_action_once_with_its_service():
    assert tuple(a.name for a in DESK_ACTIONS) == NAMES
    assert desk_action("extend").service is desk.extend
    assert desk_action("note").service is desk.add_note
    assert desk_action("export").service is desk.export_for
    assert desk_action("erase").service is desk.erase_for
    for name, refused in (("answer", False), ("refuse", True)):
        closing = desk_action(name).service
        assert isinstance(closing, partial) and closing.func is desk.close
        assert closing.keywords == {"refused": refused}
    assert {a.name for a in DESK_ACTIONS if a.separate} == {"export", "erase"}


def test_the_admin_offers_the_registrys_actions_with_its_labels_and_permissions():
    assert tuple(admin_desk.ACTIONS) == NAMES
    for name, action in admin_desk.ACTIONS.items():
        assert action.label == BY_NAME[name].label
        assert action.needs == BY_NAME[name].needs
    assert admin_desk.ACTIONS["erase"].needs == (perms.ERASE_MEMORY,)
    assert admin_desk.ACTIONS["export"].needs == (perms.EXPORT_MEMORY,)


def test_the_api_offers_each_action_as_an_act_value_or_its_own_url():
    choices = tuple(ActSerializer().fields["action"].choices)
    assert choices == ("start", "assign", "extend", "note", "answer", "refuse")
    for action in DESK_ACTIONS:
        if action.separate:
            assert action.name in SubjectRequestViewSet.rules
            rule = SubjectRequestViewSet.rules[action.name]
            assert rule.perms == (perms.CHANGE_SUBJECTREQUEST, *action.needs)
        else:
            assert action.name in choices
            assert SubjectRequestViewSet.rules["act"] is api_permissions.REQUEST_CHANGE


def test_the_command_line_runs_its_desk_verbs_through_the_registry():
    """``memory requests export|erase|extend|close`` name the registry's actions (close:
    answer or refuse); the verbs that only read (list, show) or open a request are the
    CLI's own."""
    source = Path(cli_requests.__file__).read_text(encoding="utf-8")
    for verb in ("export", "erase", "extend", "close"):
        assert verb in cli_requests.HANDLERS
    for name in ("export", "erase", "extend"):
        assert f'desk_action("{name}")' in source
    assert 'desk_action("refuse" if refused else "answer")' in source


def test_no_interface_calls_an_action_s_service_around_the_registry():
    for module in (admin_desk, cli_requests):
        source = Path(module.__file__).read_text(encoding="utf-8")
        for service in ("start", "assign", "extend", "add_note", "export_for", "erase_for"):
            assert f"desk.{service}(" not in source, (module.__name__, service)
        assert "desk.close(" not in source, module.__name__
