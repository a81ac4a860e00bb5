"""Wipe a namespace: the seed's ``wipe_all`` for one project (and user), not erasure."""

from __future__ import annotations

import secrets

from django.http import HttpResponseRedirect

from memoryapp.admin.base import actor
from memoryapp.admin.compliance import WIPE_PERM, known_namespaces, page, requires
from memoryapp.admin.confirm import confirmed
from memoryapp.admin.forms import WipeForm
from memoryapp.admin.labels import namespace_label
from memoryapp.compliance import desk_scope
from memoryapp.facade import MemoryManager


@requires(WIPE_PERM, "Wipe a namespace")
def wipe_namespace_view(modeladmin, request):
    """The seed's ``wipe_all`` for one project (and user): a soft reset, not erasure."""
    form = WipeForm(request.POST if request.method == "POST" else None)
    title = "Wipe a namespace"
    common = {"title": title, "form": form, "namespaces": known_namespaces(request.user)}
    if request.method == "POST" and form.is_valid() and _within_desk(request.user, form):
        project = form.cleaned_data["project"].strip()
        user = form.cleaned_data["user"].strip() or None
        names = {
            "project_label": namespace_label(project),
            "user_label": user,
            "project": project,
            # Not "user": the admin's templates show the signed-in user under that name.
            "user_namespace": user or "",
        }
        mm = MemoryManager(project=project, user=user)
        if not confirmed(request):
            found = mm.wipe_preview()  # what wipe_all below clears, counted by the same binding
            return page(
                modeladmin,
                request,
                "memoryapp/admin/wipe_namespace.html",
                step="confirm",
                memories=found.memories,
                summaries=found.summaries,
                **names,
                **common,
            )
        result = mm.wipe_all(actor=actor(request))
        # Post/redirect/get: the result page is a GET, so reloading it shows the result
        # again instead of wiping again. The result waits in the session (not the URL,
        # which would put namespace names in access logs and browser history).
        token = _keep_wipe_result(request, {**names, **result.as_dict()})
        return HttpResponseRedirect(f"{request.path}?{WIPE_RESULT}={token}")
    if request.method == "GET" and WIPE_RESULT in request.GET:
        shown = request.session.get(WIPE_RESULTS_KEY, {}).get(request.GET[WIPE_RESULT])
        if shown is not None:
            return page(
                modeladmin,
                request,
                "memoryapp/admin/wipe_namespace.html",
                step="result",
                result=shown,
                **{k: shown[k] for k in ("project_label", "user_label", "project")},
                **common,
            )
        common["gone"] = True  # another browser, or a session that has ended
    return page(modeladmin, request, "memoryapp/admin/wipe_namespace.html", step="form", **common)


def _within_desk(user, form) -> bool:
    """Whether the project (and user) namespace are of tenants ``user``'s desk handles;
    if not, the form says so (a tenant-scoped officer wipes their tenants' only)."""
    named = (form.cleaned_data["project"].strip(), form.cleaned_data["user"].strip() or None)
    if desk_scope.may_handle_keys(user, *named):
        return True
    form.add_error("project", desk_scope.outside_desk(user, "namespace"))
    return False


WIPE_RESULT = "result"
"""The query parameter naming a wipe's result on the page it redirects to."""
WIPE_RESULTS_KEY = "memoryapp_wipe_results"
KEPT_WIPE_RESULTS = 5  # per session: the last few wipes' pages stay reloadable


def _keep_wipe_result(request, result: dict) -> str:
    """Keep ``result`` in the session under a new random token; the oldest beyond a few go."""
    kept = dict(request.session.get(WIPE_RESULTS_KEY, {}))
    token = secrets.token_urlsafe(9)
    kept[token] = result
    request.session[WIPE_RESULTS_KEY] = dict(list(kept.items())[-KEPT_WIPE_RESULTS:])
    return token
