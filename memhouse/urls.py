from django.urls import include, path

from memhouse import health

urlpatterns = [
    path("healthz", health.healthz),
    path("readyz", health.readyz),
    path("api/v1/", include("memhouse.api_urls")),
    path("console/", include("console.urls")),
]
