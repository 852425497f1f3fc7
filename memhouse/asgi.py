import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "memhouse.settings")
application = get_asgi_application()

from memhouse.checks import dev_server_bind_host, require_safe_secret_key  # noqa: E402

# Never serve others with the built-in key (gunicorn/uvicorn: bind address unknown).
require_safe_secret_key(bind_host=dev_server_bind_host())
