"""The one settings module. Every value comes from the environment (see docs/configuration.md)."""

from __future__ import annotations

import os
from pathlib import Path
from urllib.parse import parse_qs, unquote, urlparse

from memhouse.core.env import env_bool, env_float, env_int, env_list, env_str

BASE_DIR = Path(__file__).resolve().parent.parent

DEBUG = env_bool("MEMHOUSE_DEBUG", False)
# The fallback key is for local use only; production sets MEMHOUSE_SECRET_KEY(_FILE).
# memhouse.checks refuses to serve with it unless DEBUG, bound to loopback, or this:
MEMHOUSE_BUILTIN_SECRET_KEY = "memhouse-insecure-local-key-change-me"
SECRET_KEY = env_str("MEMHOUSE_SECRET_KEY", MEMHOUSE_BUILTIN_SECRET_KEY)
MEMHOUSE_ALLOW_INSECURE_LOCAL = env_bool("MEMHOUSE_ALLOW_INSECURE_LOCAL", False)
ALLOWED_HOSTS = env_list("MEMHOUSE_ALLOWED_HOSTS",
                         ["localhost", "127.0.0.1", "[::1]", "testserver"])
CSRF_TRUSTED_ORIGINS = env_list("MEMHOUSE_CSRF_TRUSTED_ORIGINS", [])

INSTALLED_APPS = [
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    # Before staticfiles: `runserver` then leaves /static/ to WhiteNoise, as in production.
    "whitenoise.runserver_nostatic",
    "django.contrib.staticfiles",
    "rest_framework",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "django_htmx",
    "axes",
    "knowledge",
    "retrieval",
    "governance",
    "console",
    # The wiring on top (memhouse.apps): deploy checks, metering hook, serve/api_doc.
    "memhouse",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    # Secure cookies and HSTS on HTTPS to a non-loopback host (MEMHOUSE_AUTO_TRANSPORT_SECURITY).
    "memhouse.transport.AutoTransportSecurityMiddleware",
    # /static/ from STATIC_ROOT in every served mode (serve, gunicorn), before the rest.
    "whitenoise.middleware.WhiteNoiseMiddleware",
    # With a read replica: a writer's next reads wait for the replica to replay its write.
    "memhouse.core.db_router.ReadYourWritesMiddleware",
    "memhouse.core.errors.ConflictRetryMiddleware",  # a deadlocked request runs again
    "memhouse.core.errors.ApiErrorMiddleware",  # 503 database_unavailable outside DRF views
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    "csp.middleware.CSPMiddleware",
    "memhouse.observability.MetricsMiddleware",
    "memhouse.usage.RequestScopeMiddleware",  # bills a request's model calls to its principal
    "axes.middleware.AxesMiddleware",  # the console login's lockout page
]

# Sign-in throttling (django-axes) on POST /api/v1/auth/token, the console login and the
# current-password check of a password change: after MEMHOUSE_LOGIN_FAILURE_LIMIT
# failures for one username from one address, that pair is refused for
# MEMHOUSE_LOGIN_COOLOFF_MINUTES (429 `rate_limited` with Retry-After on the API). Per
# pair, so the lockout is no weapon (issue #34): nobody elsewhere can lock a person out,
# and attempts while locked do not restart the cool-off.
AUTHENTICATION_BACKENDS = [
    "axes.backends.AxesStandaloneBackend",
    "django.contrib.auth.backends.ModelBackend",
]
AXES_FAILURE_LIMIT = env_int("MEMHOUSE_LOGIN_FAILURE_LIMIT", 5, minimum=1)
AXES_COOLOFF_MINUTES = env_int("MEMHOUSE_LOGIN_COOLOFF_MINUTES", 15, minimum=1)
AXES_COOLOFF_TIME = AXES_COOLOFF_MINUTES / 60  # hours
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
AXES_RESET_COOL_OFF_ON_FAILURE_DURING_LOCKOUT = False
# Not reset on success: failures age out instead.
AXES_RESET_ON_SUCCESS = False
AXES_HTTP_RESPONSE_CODE = 429
AXES_LOCKOUT_TEMPLATE = "console/locked_out.html"
AXES_LOCKOUT_CALLABLE = "memhouse.authentication.lockout_response"
# Behind N reverse proxies the client is the Nth X-Forwarded-For entry from the right
# (memhouse/core/client_ip.py); 0 means the header is never trusted.
MEMHOUSE_TRUSTED_PROXY_COUNT = env_int("MEMHOUSE_TRUSTED_PROXY_COUNT", 0, minimum=0)
AXES_CLIENT_IP_CALLABLE = "memhouse.core.client_ip.client_ip"
AXES_ENABLED = env_bool("MEMHOUSE_LOGIN_THROTTLING", True)
AXES_VERBOSE = False

ROOT_URLCONF = "memhouse.urls"
WSGI_APPLICATION = "memhouse.wsgi.application"
ASGI_APPLICATION = "memhouse.asgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

# --- Database -------------------------------------------------------------------------
# With DATABASE_URL, that server; without it, the embedded PostgreSQL + pgvector.
DATA_DIR = Path(env_str("MEMHOUSE_DATA_DIR", "")) if env_str("MEMHOUSE_DATA_DIR") else None


def _database_from_url(url: str, name: str = "DATABASE_URL") -> dict[str, object]:
    parsed = urlparse(url)
    if parsed.scheme not in {"postgres", "postgresql"}:
        from django.core.exceptions import ImproperlyConfigured

        raise ImproperlyConfigured(f"{name} must be a postgresql:// URL")
    return {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": unquote(parsed.path.lstrip("/")) or "memhouse",
        "USER": unquote(parsed.username or ""),
        "PASSWORD": unquote(parsed.password or ""),
        # libpq's form for a Unix socket: postgresql://user@/db?host=/run/postgresql
        "HOST": parse_qs(parsed.query).get("host", [parsed.hostname or ""])[0],
        "PORT": str(parsed.port or parse_qs(parsed.query).get("port", [""])[0]),
    }


_database_url = env_str("DATABASE_URL")
if _database_url:
    _default_db = _database_from_url(_database_url)
else:
    from memhouse.core.embedded_db import database_settings

    _default_db = database_settings(DATA_DIR)

# How often an API request whose transaction PostgreSQL aborted to break a deadlock (or
# a serialization conflict) is run again before the answer is 409 write_conflict.
MEMHOUSE_WRITE_CONFLICT_RETRIES = env_int("MEMHOUSE_WRITE_CONFLICT_RETRIES", 3, minimum=0)
# Every request runs in one transaction: the Account setting is transaction-local
# (set_config(..., true)), so it can never leak to the next request on a pooled connection.
_default_db["ATOMIC_REQUESTS"] = True
_default_db["CONN_MAX_AGE"] = env_int("MEMHOUSE_DB_CONN_MAX_AGE", 0, minimum=0)
DATABASES = {"default": _default_db}


def replica_database(url: str) -> dict[str, object]:
    """DATABASES['replica'] for a streaming hot standby of the primary, as the same role."""
    db = _database_from_url(url, "DATABASE_REPLICA_URL")
    # Only its own read transactions (memhouse.core.db_router.replica_reads), never a
    # request's: a request's transaction, and every write, is the primary's.
    db["ATOMIC_REQUESTS"] = False
    db["CONN_MAX_AGE"] = _default_db["CONN_MAX_AGE"]
    # A standby that is down costs a request this long once; then it is skipped a while.
    db["OPTIONS"] = {"connect_timeout": 5}
    # A test run reads its test database through this alias (Django points a mirror at
    # the primary's); it never creates one on a read-only standby.
    db["TEST"] = {"MIRROR": "default"}
    return db


# A read replica for the reads docs/deploy.md lists as replica-safe ("Read replicas");
# unset, the router sends everything to `default`, as with no router.
_replica_url = env_str("DATABASE_REPLICA_URL")
if _replica_url:
    DATABASES["replica"] = replica_database(_replica_url)
DATABASE_ROUTERS = ["memhouse.core.db_router.ReplicaRouter"]
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# --- Auth -----------------------------------------------------------------------------
# Django's full set (issue #34): not like the username, at least
# MEMHOUSE_PASSWORD_MIN_LENGTH characters, not one of 20,000 common passwords, not all
# digits. Applied wherever a password is set (`manage.py people`, an invitation, a
# password change): 400 `weak_password` saying why.
AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator",
     "OPTIONS": {"min_length": env_int("MEMHOUSE_PASSWORD_MIN_LENGTH", 8, minimum=8)}},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]
LOGIN_URL = "/console/login/"
LOGIN_REDIRECT_URL = "/console/"
API_TOKEN_TTL_SECONDS = env_int("MEMHOUSE_API_TOKEN_TTL_SECONDS", 3600, minimum=60)
# How long an invitation link (knowledge.people) lets the invitee set their password.
MEMHOUSE_INVITATION_TTL_HOURS = env_int("MEMHOUSE_INVITATION_TTL_HOURS", 72, minimum=1)
# Where people reach the console (e.g. https://memory.example.com), for links made
# outside a request: `manage.py people ... --invite`. Unset: the address the last
# `manage.py serve` on this data directory served (memhouse/core/served_url.py).
MEMHOUSE_PUBLIC_URL = env_str("MEMHOUSE_PUBLIC_URL", "").rstrip("/")
SESSION_COOKIE_HTTPONLY = True
SESSION_COOKIE_SAMESITE = "Lax"
# A console sign-in lasts a working day, not Django's two weeks.
SESSION_COOKIE_AGE = env_int("MEMHOUSE_SESSION_COOKIE_AGE", 8 * 3600, minimum=60)

# --- Transport security (docs/deploy.md) ----------------------------------------------
# Behind a TLS proxy: secure cookies, HSTS, and trust the proxy's X-Forwarded-Proto
# (only when the proxy sets it and clients cannot reach the server directly).
_secure = env_bool("MEMHOUSE_SECURE_COOKIES", False)
SESSION_COOKIE_SECURE = _secure
CSRF_COOKIE_SECURE = _secure
SECURE_HSTS_SECONDS = env_int("MEMHOUSE_HSTS_SECONDS", 0, minimum=0)
SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("MEMHOUSE_HSTS_INCLUDE_SUBDOMAINS", False)
SECURE_HSTS_PRELOAD = env_bool("MEMHOUSE_HSTS_PRELOAD", False)
SECURE_SSL_REDIRECT = env_bool("MEMHOUSE_SSL_REDIRECT", False)
# On by default: a request that arrives over HTTPS for a host that is not loopback gets
# Secure cookies and HSTS whatever the two settings above say (memhouse/transport.py);
# false leaves them to MEMHOUSE_SECURE_COOKIES and MEMHOUSE_HSTS_SECONDS alone.
MEMHOUSE_AUTO_TRANSPORT_SECURITY = env_bool("MEMHOUSE_AUTO_TRANSPORT_SECURITY", True)
# /healthz and /readyz answer over plain HTTP for container health checks.
SECURE_REDIRECT_EXEMPT = [r"^healthz$", r"^readyz$"]
if env_bool("MEMHOUSE_TRUST_X_FORWARDED_PROTO", False):
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"
X_FRAME_OPTIONS = "DENY"
# Content-Security-Policy (django-csp): the console loads htmx and its own script and
# stylesheet from /static/ and has no inline script or style (htmx's indicator styles
# are off in base.html), so everything is 'self'. /api/docs/ relaxes styles (memhouse.urls).
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": ["'self'"],
        "script-src": ["'self'"],
        "style-src": ["'self'"],
        "img-src": ["'self'", "data:"],
        "connect-src": ["'self'"],
        "font-src": ["'self'"],
        "object-src": ["'none'"],
        "base-uri": ["'self'"],
        "form-action": ["'self'"],
        "frame-ancestors": ["'none'"],
    },
}

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "memhouse.authentication.ApiKeyAuthentication",
        "memhouse.authentication.ConsoleSessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["memhouse.core.permissions.IsAccountMember"],
    "EXCEPTION_HANDLER": "memhouse.core.errors.exception_handler",
    "UNAUTHENTICATED_USER": None,
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"],
    # DRF's JSON parser with a nesting limit: deep nesting is a 400, never a RecursionError.
    "DEFAULT_PARSER_CLASSES": ["memhouse.core.parsers.DepthLimitedJSONParser"],
    "DEFAULT_SCHEMA_CLASS": "memhouse.schema.MemhouseAutoSchema",
    "DEFAULT_THROTTLE_CLASSES": ["memhouse.usage.CredentialRateThrottle"],
}
# Requests per acting peer (a peerless key: per credential) per minute, and per Account
# per minute, so a fresh sign-in token or a second key adds no budget (0 switches a limit
# off); counted in Redis.
MEMHOUSE_RATE_LIMIT_PER_MINUTE = env_int("MEMHOUSE_RATE_LIMIT_PER_MINUTE", 600, minimum=0)
MEMHOUSE_RATE_LIMIT_PER_ACCOUNT_PER_MINUTE = env_int(
    "MEMHOUSE_RATE_LIMIT_PER_ACCOUNT_PER_MINUTE", 6000, minimum=0)
MEMHOUSE_RATE_LIMIT_REDIS_URL = env_str("MEMHOUSE_RATE_LIMIT_REDIS_URL", "")
SPECTACULAR_SETTINGS = {
    "TITLE": "MemHouse API",
    "DESCRIPTION": "Governed long-term memory for AI agents. Authenticate with "
                   "`Authorization: Bearer <key>`. Every error is "
                   '`{"error": {"code", "message", "details"}}`.',
    "VERSION": "1",
    "SERVE_INCLUDE_SCHEMA": False,
    "SWAGGER_UI_DIST": "SIDECAR",  # assets ship in a package: no CDN
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "COMPONENT_SPLIT_REQUEST": True,
    # Examples for every operation (memhouse/schema_examples.py), injected after generation.
    "POSTPROCESSING_HOOKS": ["drf_spectacular.hooks.postprocess_schema_enums",
                             "memhouse.schema.postprocess_examples"],
}

# --- Celery ---------------------------------------------------------------------------
REDIS_URL = env_str("REDIS_URL", "redis://127.0.0.1:6379/0")
CELERY_BROKER_URL = env_str("CELERY_BROKER_URL", REDIS_URL)
CELERY_RESULT_BACKEND = None
# Eager mode runs tasks in-process: for the embedded single-machine default and tests that
# are not about queuing. Production sets it false and runs workers.
CELERY_TASK_ALWAYS_EAGER = env_bool("MEMHOUSE_CELERY_EAGER", True)
CELERY_TASK_EAGER_PROPAGATES = True
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
# One named queue per kind of work (seed "Per-state queues"), so each kind scales on its
# own workers (compose.yaml; docs/deploy.md "Queues"). A task not listed goes to the
# default queue ("celery"), which the governance workers also consume.
MEMHOUSE_QUEUE_TASKS: dict[str, tuple[str, ...]] = {
    # new observations become proposed statements, gates A/B, placement
    "extraction": ("governance.process_messages", "governance.process_document_version",
                   "governance.sweep_unprocessed"),
    # curator review deadlines, audit chain verification
    "validation": ("governance.age_overdue_reviews", "governance.verify_audit_chains"),
    # timers of the lifecycle and the projections a state change dirties
    "lifecycle": ("governance.expire_due", "governance.revalidate_due",
                  "governance.reconfirm_supported", "retrieval.rebuild_projections"),
    # deductions and what depends on them
    "reasoning": ("governance.deduce", "governance.contributor_changed"),
    # the nightly work: stale questions, entity resolution, duplicate consolidation
    "dream-time": ("governance.decay_unanswered_questions", "governance.resolve_entities",
                   "governance.resolve_entity_scopes", "governance.consolidate_duplicates"),
    # the encoder and the search indexes fed after it
    "embedding": ("retrieval.embed_knowledge", "retrieval.embed_messages",
                  "retrieval.embed_batch", "retrieval.index_entities"),
}
CELERY_TASK_ROUTES = {task: {"queue": queue}
                      for queue, tasks in MEMHOUSE_QUEUE_TASKS.items() for task in tasks}
# Redis redelivers a task whose worker died without acknowledging it (acks_late) once it
# has been unacknowledged this long; keep it above the longest task (a redelivery while the
# first run is still going is harmless, tasks are idempotent, but wasted work).
CELERY_BROKER_TRANSPORT_OPTIONS = {
    "visibility_timeout": env_int("MEMHOUSE_CELERY_VISIBILITY_TIMEOUT", 3600, minimum=1),
}
# `manage.py serve` runs the beat schedule (memhouse/core/celery_schedule.py) in-process; false
# (or `serve --no-beat`) for a deployment that runs `celery -A memhouse beat` instead.
MEMHOUSE_SERVE_BEAT = env_bool("MEMHOUSE_SERVE_BEAT", True)

# --- Models (optional) ----------------------------------------------------------------
# minilm-onnx: int8 MiniLM on onnxruntime (no torch); minilm-torch: the fp32 model through
# sentence-transformers, needs `pip install 'memhouse[torch]'`. A switch is a new vector
# space: `manage.py reembed` moves the stored statements into it.
MEMHOUSE_EMBEDDER = env_str("MEMHOUSE_EMBEDDER", "minilm-onnx")
MEMHOUSE_EMBEDDING_QUERY_PREFIX = env_str("MEMHOUSE_EMBEDDING_QUERY_PREFIX", "")
# One intra-op thread (onnxruntime or torch): a 10-word query is too small to split, and
# with several requests and strategy threads in flight more threads only contend.
MEMHOUSE_EMBEDDER_THREADS = env_int("MEMHOUSE_EMBEDDER_THREADS", 1, minimum=1)
MEMHOUSE_QUERY_CACHE_SIZE = env_int("MEMHOUSE_QUERY_CACHE_SIZE", 1024, minimum=0)
MEMHOUSE_LLM_BASE_URL = env_str("MEMHOUSE_LLM_BASE_URL", "")
MEMHOUSE_LLM_MODEL = env_str("MEMHOUSE_LLM_MODEL", "")
MEMHOUSE_LLM_API_KEY = env_str("MEMHOUSE_LLM_API_KEY", "")
MEMHOUSE_LLM_TIMEOUT = env_float("MEMHOUSE_LLM_TIMEOUT", 20.0)
MEMHOUSE_LLM_MAX_RETRIES = env_int("MEMHOUSE_LLM_MAX_RETRIES", 2)
# 0: no max_tokens in requests (OpenAI's newer models refuse the parameter); set it for
# local servers, where a small model may otherwise generate until its context is full.
MEMHOUSE_LLM_MAX_TOKENS = env_int("MEMHOUSE_LLM_MAX_TOKENS", 0)
# auto: the LLM extractor when a provider is configured, else rule-based; rule: never a model.
MEMHOUSE_EXTRACTOR = env_str("MEMHOUSE_EXTRACTOR", "auto")

# --- Retrieval ------------------------------------------------------------------------
MEMHOUSE_EXPERIMENTAL_MINIMAL_RECALL = env_bool("MEMHOUSE_EXPERIMENTAL_MINIMAL_RECALL", False)
# Seconds entity_match may reuse its count of a reader's visible statements (0 = never).
MEMHOUSE_ENTITY_STATS_TTL = env_int("MEMHOUSE_ENTITY_STATS_TTL", 60, minimum=0)
# ask answers only when some retrieved statement is about the question: cosine similarity
# to it of at least this much (0 turns the check off). Chosen for the default embedder on
# LoCoMo, small-memory pairs and unrelated questions (bench/README.md, "ask abstention");
# set it again when you change the embedding model.
MEMHOUSE_ASK_MIN_SIMILARITY = env_float("MEMHOUSE_ASK_MIN_SIMILARITY", 0.38)
MEMHOUSE_STRATEGY_ALLOWLIST = env_list(
    "MEMHOUSE_STRATEGY_ALLOWLIST",
    ["semantic", "lexical", "temporal", "salience_recency", "entity_match", "relation_expand"],
)

# --- Limits ---------------------------------------------------------------------------
MEMHOUSE_MAX_MESSAGE_CHARS = env_int("MEMHOUSE_MAX_MESSAGE_CHARS", 20_000, minimum=1)
MEMHOUSE_MAX_BATCH = env_int("MEMHOUSE_MAX_BATCH", 500, minimum=1)
# Extraction costs CPU in proportion to text (a 20,000-character message takes seconds), so
# text is budgeted: per POST /messages or document version (413 request_too_large), and
# per acting peer and per Account over a rolling window, counted in the usage ledger (429
# rate_limited with Retry-After; 0 = off). Messages and documents share the budget.
# Deepest JSON nesting any request body may have (400 malformed_request beyond it), and
# the deepest a message's metadata may nest (400 invalid_input).
MEMHOUSE_MAX_JSON_DEPTH = env_int("MEMHOUSE_MAX_JSON_DEPTH", 32, minimum=4)
MEMHOUSE_MAX_METADATA_DEPTH = env_int("MEMHOUSE_MAX_METADATA_DEPTH", 8, minimum=1)
MEMHOUSE_MAX_REQUEST_CHARS = env_int("MEMHOUSE_MAX_REQUEST_CHARS", 100_000, minimum=1)
MEMHOUSE_INGEST_CHARS_PER_WINDOW = env_int("MEMHOUSE_INGEST_CHARS_PER_WINDOW", 1_000_000,
                                           minimum=0)
MEMHOUSE_INGEST_CHARS_PER_ACCOUNT_WINDOW = env_int(
    "MEMHOUSE_INGEST_CHARS_PER_ACCOUNT_WINDOW", 10_000_000, minimum=0)
MEMHOUSE_INGEST_WINDOW_SECONDS = env_int("MEMHOUSE_INGEST_WINDOW_SECONDS", 3600, minimum=1)
# Most statements one document version may yield: a version that would yield more is set
# aside (`failed`, error `too_many_statements`) before any is written, and its document
# keeps what earlier versions hold. Split such a document (0 = no cap).
MEMHOUSE_MAX_STATEMENTS_PER_VERSION = env_int("MEMHOUSE_MAX_STATEMENTS_PER_VERSION", 1000,
                                              minimum=0)
# How many times a message or document version may start processing (each start is
# counted before the work) before one whose work keeps being cut off (a worker killed or
# restarted mid-task) is set aside as dead-lettered, error `crashed_repeatedly`, instead
# of re-enqueued for ever by the sweeper. Every start counts, a retry after a database
# error too; an administrator's retry (POST /api/v1/admin/dead-letters/...) starts over.
MEMHOUSE_MAX_INGEST_ATTEMPTS = env_int("MEMHOUSE_MAX_INGEST_ATTEMPTS", 3, minimum=1)
DATA_UPLOAD_MAX_MEMORY_SIZE = env_int("MEMHOUSE_MAX_REQUEST_BYTES", 10 * 1024 * 1024, minimum=1024)

# --- Account archives (governance/archive.py) -------------------------------------------
# The operator key archives are signed with (HMAC-SHA256); empty: a key derived from
# SECRET_KEY, so archives then import only where that secret is the same, or while
# SECRET_KEY is the built-in one, a random key generated once into <data dir>/archive.key.
MEMHOUSE_ARCHIVE_KEY = env_str("MEMHOUSE_ARCHIVE_KEY", "")
# Import caps: total unpacked bytes of an archive, and the longest row.
MEMHOUSE_ARCHIVE_MAX_BYTES = env_int("MEMHOUSE_ARCHIVE_MAX_BYTES", 8 << 30, minimum=1 << 20)
MEMHOUSE_ARCHIVE_MAX_ROW_BYTES = env_int("MEMHOUSE_ARCHIVE_MAX_ROW_BYTES", 64 << 20,
                                         minimum=1 << 16)
# Whole-deployment backup and restore (governance/backup.py) run pg_dump/pg_restore as a
# role that bypasses row-level security; with DATABASE_URL this URL names it (the
# embedded server uses its own superuser).
MEMHOUSE_BACKUP_DATABASE_URL = env_str("MEMHOUSE_BACKUP_DATABASE_URL", "")

# --- Static, i18n, logging ------------------------------------------------------------
STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
# `collectstatic` writes here (the image at build time, `manage.py serve` on each start);
# WhiteNoise serves it. Gitignored.
STATIC_ROOT = Path(env_str("MEMHOUSE_STATIC_ROOT", "") or BASE_DIR / "build" / "static")
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    # Content-hashed names (cached for a year, busted by any change) with gzip copies.
    # Templates need the manifest collectstatic writes unless DEBUG is on.
    "staticfiles": {"BACKEND": "whitenoise.storage.CompressedManifestStaticFilesStorage"},
}
LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    # MEMHOUSE_LOG_FORMAT=json for one JSON object per line (no statement text is logged).
    "formatters": {"json": {"()": "memhouse.observability.JsonFormatter"},
                   "server": {"()": "django.utils.log.ServerFormatter",
                              "format": "[{server_time}] {message}", "style": "{"}},
    "filters": {"secret_paths": {"()": "memhouse.observability.RedactSecretPaths"}},
    "handlers": {"console": {"class": "logging.StreamHandler",
                             **({"formatter": "json"}
                                if env_str("MEMHOUSE_LOG_FORMAT") == "json" else {})},
                 # runserver's request log, as Django's default, less secret paths.
                 "server": {"class": "logging.StreamHandler", "filters": ["secret_paths"],
                            "formatter": ("json" if env_str("MEMHOUSE_LOG_FORMAT") == "json"
                                          else "server")}},
    "root": {"handlers": ["console"], "level": env_str("MEMHOUSE_LOG_LEVEL", "INFO")},
    "loggers": {"django.db.backends": {"level": "WARNING"},
                "django.server": {"handlers": ["server"], "level": "INFO",
                                  "propagate": False}},
}

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
