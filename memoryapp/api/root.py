"""``GET /api/``: the API root, a JSON index of the documentation and the resources; and
``/api/redoc/``, ReDoc served from this server alone.

Open to anyone, like the schema and its documentation pages: they name paths, never data.
"""

from __future__ import annotations

from django.http import JsonResponse
from django.urls import NoReverseMatch, reverse
from django.views.decorators.http import require_safe
from drf_spectacular.views import SpectacularRedocView

# ReDoc's script (drf-spectacular-sidecar) draws a "by Redocly" logo from cdn.redoc.ly,
# unconditionally; the page's policy keeps the browser from asking any other host for
# anything (it renders offline, and a reader's address goes to no third party). ReDoc
# styles itself inline and runs its search in a worker made from a blob.
REDOC_POLICY = (
    "default-src 'self'; script-src 'self' blob:; worker-src 'self' blob:; "
    "style-src 'self' 'unsafe-inline'; img-src 'self' data:; font-src 'self' data:; "
    "connect-src 'self'"
)


class OfflineRedocView(SpectacularRedocView):
    """drf-spectacular's ReDoc page without its font CDN links, under a same-origin policy."""

    template_name = "memoryapp/api/redoc.html"

    def finalize_response(self, request, response, *args, **kwargs):
        response = super().finalize_response(request, response, *args, **kwargs)
        response["Content-Security-Policy"] = REDOC_POLICY
        return response


# The routes of urls.py that are not a router's lists (name -> what it is).
_ACTIONS = {
    "recall": "recall",
    "crystallize": "crystallize",
    "export": "exports",
    "wipe-all": "wipe-all",
    "store-problems": "store-problems",
}


def _link(request, name: str) -> str | None:
    try:
        return request.build_absolute_uri(reverse(f"memoryapp_api:{name}"))
    except NoReverseMatch:
        return None


@require_safe
def api_root(request, *, router=None):
    """Links to the docs (Swagger UI, ReDoc), the OpenAPI schema and every resource."""
    resources: dict[str, str] = {}
    for prefix, _viewset, basename in router.registry if router is not None else ():
        link = _link(request, f"{basename}-list")
        if link is not None:
            resources[prefix] = link
    for name, label in _ACTIONS.items():
        link = _link(request, name)
        if link is not None:
            resources[label] = link
    return JsonResponse(
        {
            "docs": _link(request, "docs"),
            "redoc": _link(request, "redoc"),
            "schema": _link(request, "schema"),
            "authentication": "Authorization: Token <key> (docs/api.md: how to get one)",
            "resources": resources,
        }
    )
