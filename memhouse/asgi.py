import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "memhouse.settings")
application = get_asgi_application()

from memhouse.checks import require_safe_secret_key  # noqa: E402  (settings are loaded)

require_safe_secret_key()  # never serve others with the built-in key
