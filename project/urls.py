"""URL configuration of the runnable project."""

from django.contrib import admin
from django.urls import include, path
from django.views.generic import RedirectView

from memoryapp.ops.views import healthz, livez, metrics_view

urlpatterns = [
    path("", RedirectView.as_view(url="/admin/", permanent=False)),
    path("healthz", healthz, name="healthz"),
    path("livez", livez, name="livez"),
    path("metrics", metrics_view, name="metrics"),
    path("admin/", admin.site.urls),
    path("api/", include("memoryapp.api.urls")),
]
