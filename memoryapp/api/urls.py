"""Routes of the API (include under ``/api/``), the OpenAPI schema and its interactive docs."""

from django.urls import path, re_path
from drf_spectacular.utils import extend_schema
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView
from rest_framework.routers import SimpleRouter

from memoryapp.api import subject_requests, views

app_name = "memoryapp_api"

router = SimpleRouter()
router.register("memories", views.MemoryViewSet, basename="memory")
router.register("session-summaries", views.SessionSummaryViewSet, basename="session-summary")
router.register("review-items", views.ReviewItemViewSet, basename="review-item")
router.register("erasures", views.ErasureViewSet, basename="erasure")
router.register("events", views.MemoryEventViewSet, basename="event")
router.register(
    "subject-requests", subject_requests.SubjectRequestViewSet, basename="subject-request"
)


@extend_schema(exclude=True)
class SchemaView(SpectacularAPIView):
    """The OpenAPI 3 document of the API (which does not list itself)."""


urlpatterns = [
    *router.urls,
    path("recall/", views.RecallView.as_view(), name="recall"),
    path("crystallize/", views.CrystallizeView.as_view(), name="crystallize"),
    path("wipe-all/", views.WipeAllView.as_view(), name="wipe-all"),
    path("exports/", views.ExportView.as_view(), name="export"),
    path("store-problems/", views.StoreProblemsView.as_view(), name="store-problems"),
    path("schema/", SchemaView.as_view(), name="schema"),
    path("docs/", SpectacularSwaggerView.as_view(url_name="memoryapp_api:schema"), name="docs"),
    # Anything else under /api/ is a JSON 404, never an HTML page.
    re_path(r"^.*$", views.not_found),
]
