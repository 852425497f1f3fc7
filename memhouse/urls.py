from csp.decorators import csp_update
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerSplitView

from memhouse import health
from memhouse.mcp.http import mcp_endpoint
from memhouse.observability import metrics_view

urlpatterns = [
    path("healthz", health.healthz),
    path("readyz", health.readyz),
    path("metrics", metrics_view),
    path("api/v1/", include("memhouse.api_urls")),
    path("api/schema/", SpectacularAPIView.as_view(authentication_classes=[],
                                                   permission_classes=[]), name="schema"),
    # The split view serves its init script from a URL (the CSP allows no inline script);
    # Swagger UI's own page keeps a small inline style.
    path("api/docs/", csp_update({"style-src": ["'unsafe-inline'"]})(
        SpectacularSwaggerSplitView.as_view(url_name="schema", authentication_classes=[],
                                            permission_classes=[])), name="api-docs"),
    path("console/", include("console.urls")),
    path("mcp/", mcp_endpoint, name="mcp"),  # MCP over Streamable HTTP (memhouse.mcp.http)
    path("mcp", mcp_endpoint),  # the same, for clients configured without the slash
]

# Unknown /api/ paths and last-resort errors in the API's one error shape (memhouse.core.errors).
handler400 = "memhouse.core.errors.bad_request"
handler403 = "memhouse.core.errors.permission_denied"
handler404 = "memhouse.core.errors.page_not_found"
handler500 = "memhouse.core.errors.server_error"
