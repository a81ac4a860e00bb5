"""Routes of the API (include under ``/api/``), the OpenAPI schema and its interactive docs."""

from django.urls import path, re_path
from drf_spectacular.utils import extend_schema
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView
from rest_framework.routers import SimpleRouter

from memoryapp.api.root import OfflineRedocView, api_root
from memoryapp.api.views.audit import MemoryEventViewSet, StoreProblemsView
from memoryapp.api.views.base import not_found
from memoryapp.api.views.erasures import ErasureViewSet, WipeAllView
from memoryapp.api.views.exports import ExportView
from memoryapp.api.views.memories import MemoryViewSet
from memoryapp.api.views.recall import RecallView
from memoryapp.api.views.review import CrystallizeView, ReviewItemViewSet
from memoryapp.api.views.sessions import SessionSummaryViewSet
from memoryapp.api.views.subject_requests import SubjectRequestViewSet

app_name = "memoryapp_api"

router = SimpleRouter()
router.register("memories", MemoryViewSet, basename="memory")
router.register("session-summaries", SessionSummaryViewSet, basename="session-summary")
router.register("review-items", ReviewItemViewSet, basename="review-item")
router.register("erasures", ErasureViewSet, basename="erasure")
router.register("events", MemoryEventViewSet, basename="event")
router.register("subject-requests", SubjectRequestViewSet, basename="subject-request")


@extend_schema(exclude=True)
class SchemaView(SpectacularAPIView):
    """The OpenAPI 3 document of the API (which does not list itself)."""


urlpatterns = [
    path("", api_root, {"router": router}, name="root"),
    *router.urls,
    path("recall/", RecallView.as_view(), name="recall"),
    path("crystallize/", CrystallizeView.as_view(), name="crystallize"),
    path("wipe-all/", WipeAllView.as_view(), name="wipe-all"),
    path("exports/", ExportView.as_view(), name="export"),
    path("store-problems/", StoreProblemsView.as_view(), name="store-problems"),
    path("schema/", SchemaView.as_view(), name="schema"),
    path("docs/", SpectacularSwaggerView.as_view(url_name="memoryapp_api:schema"), name="docs"),
    # ReDoc's script comes from drf-spectacular-sidecar (REDOC_DIST = "SIDECAR"); the page
    # names no CDN and its policy lets the browser ask no other host (api/root.py).
    path("redoc/", OfflineRedocView.as_view(url_name="memoryapp_api:schema"), name="redoc"),
    # Anything else under /api/ is a JSON 404, never an HTML page.
    re_path(r"^.*$", not_found),
]
