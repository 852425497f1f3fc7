"""The one generation-provider interface of MemHouse.

Every model-backed feature (LLM extraction, reranking, ask, dream-time work) talks to a
generation model through :class:`ChatProvider`. The only shipped implementation,
:class:`OpenAICompatibleProvider`, speaks the OpenAI ``/chat/completions`` wire format and
negotiates structured output with each server (:data:`FORMATS`, most constrained first):

1. ``json_schema``: strict structured outputs (OpenAI, Azure OpenAI, vLLM, Ollama, LM Studio,
   llama.cpp's own server, LiteLLM);
2. ``json_object_schema``: ``{"type": "json_object", "schema": ...}``, the JSON mode with
   a schema that llama-cpp-python's server (and llama.cpp's) turn into a grammar;
3. ``json_object``: plain JSON mode.

From the second rung on the schema also travels in the system prompt. A server refuses a
rung with an HTTP error that names the response format (llama-cpp-python answers HTTP 500
to ``json_schema``); the provider then asks again at once one rung lower, and remembers per
base URL, for the process, the rung that worked (:func:`structured_output`). A server that
refuses all three is remembered as ``unsupported``, the call fails with a non-retryable
``http_error`` saying so, and :func:`readiness` (``/readyz``) reports it. The choice is not
persisted: servers are upgraded or swapped behind one URL, and re-learning costs one
refused request per rung per process.

Contract of ``complete_json``:

* it returns a ``dict`` that has been validated against ``schema`` by :func:`validate_json`
  whatever the response format (a provider that ignores ``strict``, or a JSON mode without
  a grammar, cannot smuggle a malformed object into the pipeline);
* it raises :class:`ProviderError` and nothing else for provider-side failures, with ``kind``
  one of ``timeout``, ``http_error``, ``invalid_response``, ``connection``;
* transient failures (timeouts, connection errors, HTTP 429 and 5xx, unparsable or
  schema-violating output) are retried up to ``max_retries`` extra times with exponential
  backoff; any other HTTP status (400, 401, 403, 404, 422...) fails at once;
* ``timeout`` bounds each attempt; ``total_timeout`` (seconds, optional) bounds the whole
  call: each attempt gets at most what is left, and no retry starts that the backoff would
  push past it (the last failure is raised instead);
* error messages never contain the API key or the prompt;
* every call is metered, whatever its outcome: :func:`memhouse.usage.record_model_call`
  appends ``model_call`` (and ``model_tokens`` when the provider reports ``usage``) to the
  Account's ledger and counts it in Prometheus, so no caller can forget to bill a call.

``get_provider()`` builds the configured provider from Django settings, or returns ``None``
when no provider is configured; callers must treat ``None`` as the deliberate "no model"
configuration, not as a failure.
"""

from __future__ import annotations

import json
import logging
import math
import random
import re
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any, Protocol, runtime_checkable

import httpx
import jsonschema

__all__ = [
    "ERROR_KINDS",
    "ChatProvider",
    "OpenAICompatibleProvider",
    "ProviderError",
    "SchemaValidationError",
    "TokenUsage",
    "get_provider",
    "readiness",
    "structured_output",
    "validate_json",
]

ERROR_KINDS: tuple[str, ...] = ("timeout", "http_error", "invalid_response", "connection")

DEFAULT_TIMEOUT_SECONDS = 30.0
DEFAULT_MAX_RETRIES = 2


class ProviderError(Exception):
    """A generation call failed; ``kind`` says how.

    ``status_code`` is set for ``http_error``; ``attempts`` is how many requests were made;
    ``retryable`` says whether this single failure was of a transient class;
    ``unsupported`` that the server refused every structured response format.
    """

    def __init__(
        self,
        kind: str,
        message: str,
        *,
        status_code: int | None = None,
        attempts: int = 1,
        retryable: bool = False,
        retry_after: float | None = None,
        unsupported: bool = False,
    ) -> None:
        if kind not in ERROR_KINDS:
            raise ValueError(f"unknown ProviderError kind {kind!r}; expected one of {ERROR_KINDS}")
        super().__init__(message)
        self.kind = kind
        self.message = message
        self.status_code = status_code
        self.attempts = attempts
        self.retryable = retryable
        self.retry_after = retry_after
        self.unsupported = unsupported

    def __str__(self) -> str:
        return f"{self.kind}: {self.message}"


@runtime_checkable
class ChatProvider(Protocol):
    """A generation model that answers with one JSON object matching a schema."""

    name: str

    def complete_json(
        self,
        *,
        system: str,
        user: str,
        schema: dict[str, Any],
        schema_name: str,
        timeout: float | None = None,
        total_timeout: float | None = None,
    ) -> dict[str, Any]: ...


# --------------------------------------------------------------------------------------------
# JSON Schema validation of model answers (jsonschema, Draft 2020-12)
# --------------------------------------------------------------------------------------------


class SchemaValidationError(ValueError):
    """``value`` does not satisfy ``schema``; ``path`` is a JSONPath-like location."""

    def __init__(self, path: str, message: str) -> None:
        super().__init__(f"{path}: {message}")
        self.path = path
        self.reason = message


def _json_path(parts: Any) -> str:
    path = "$"
    for part in parts:
        path += f"[{part}]" if isinstance(part, int) else f".{part}"
    return path


def validate_json(value: Any, schema: Mapping[str, Any] | bool) -> None:
    """Raise :class:`SchemaValidationError` unless ``value`` satisfies ``schema`` (the
    first error, deepest path first). A schema that is itself invalid raises
    ``jsonschema.SchemaError``: a programming error, not a bad model answer."""
    validator_class = jsonschema.validators.validator_for(schema, default=_VALIDATOR)
    validator_class.check_schema(schema)
    error = jsonschema.exceptions.best_match(validator_class(schema).iter_errors(value))
    if error is not None:
        raise SchemaValidationError(_json_path(error.absolute_path), error.message)


_VALIDATOR = jsonschema.Draft202012Validator


# --------------------------------------------------------------------------------------------
# OpenAI-compatible HTTP provider
# --------------------------------------------------------------------------------------------

_FENCE = re.compile(r"^\s*```(?:json|JSON)?\s*\n?(?P<body>.*?)\n?\s*```\s*$", re.DOTALL)


def _reject_constant(name: str) -> Any:
    raise ValueError(f"non-JSON constant {name}")


def _parse_content(content: str) -> Any:
    """Parse the model's message content; tolerate one surrounding Markdown code fence,
    which some OpenAI-compatible servers add when they do not enforce the schema."""
    match = _FENCE.match(content)
    text = match.group("body") if match else content
    return json.loads(text, parse_constant=_reject_constant)


class OpenAICompatibleProvider:
    """``ChatProvider`` over ``POST {base_url}/chat/completions``.

    ``base_url`` includes the API version prefix, e.g. ``https://api.openai.com/v1`` or
    ``http://127.0.0.1:11434/v1``. ``timeout`` applies to each phase of each attempt
    (connect, write, read), not to the whole retried call. ``backoff_seconds`` is the
    delay before the first retry; it doubles per retry up to ``max_backoff_seconds`` with a
    little jitter, and a 429 ``Retry-After`` header is honoured up to the same cap.
    ``transport`` and ``sleep`` exist for tests.
    """

    def __init__(
        self,
        base_url: str,
        model: str,
        *,
        api_key: str | None = None,
        timeout: float = DEFAULT_TIMEOUT_SECONDS,
        max_retries: int = DEFAULT_MAX_RETRIES,
        backoff_seconds: float = 0.5,
        max_backoff_seconds: float = 4.0,
        max_tokens: int | None = None,
        name: str = "openai-compatible",
        extra_headers: Mapping[str, str] | None = None,
        transport: httpx.BaseTransport | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        if not base_url:
            raise ValueError("base_url is required")
        if not model:
            raise ValueError("model is required")
        if max_retries < 0:
            raise ValueError("max_retries must be >= 0")
        if timeout <= 0:
            raise ValueError("timeout must be positive")
        self.base_url = base_url.rstrip("/")
        self.model = model
        self.name = name
        self.timeout = float(timeout)
        self.max_retries = int(max_retries)
        self.backoff_seconds = float(backoff_seconds)
        self.max_backoff_seconds = float(max_backoff_seconds)
        self.max_tokens = int(max_tokens) if max_tokens else None
        self._api_key = api_key or None
        self._extra_headers = dict(extra_headers or {})
        self._transport = transport
        self._sleep = sleep

    def __repr__(self) -> str:  # never show the key
        return f"OpenAICompatibleProvider(base_url={self.base_url!r}, model={self.model!r})"

    @property
    def endpoint(self) -> str:
        return f"{self.base_url}/chat/completions"

    @property
    def response_format(self) -> str:
        """The response format this server was last seen to take (:data:`FORMATS`), or
        ``json_schema`` (the first rung) while that is unknown or none worked."""
        known = _FORMATS.get(self.base_url)
        return known if known in FORMATS else JSON_SCHEMA

    def request_body(
        self, *, system: str, user: str, schema: dict[str, Any], schema_name: str,
        mode: str = "json_schema", max_tokens: int | None = None,
    ) -> dict[str, Any]:
        if mode not in FORMATS:
            raise ValueError(f"unknown response format {mode!r}; expected one of {FORMATS}")
        response_format: dict[str, Any]
        if mode == JSON_SCHEMA:
            response_format = {
                "type": JSON_SCHEMA,
                "json_schema": {"name": schema_name, "strict": True, "schema": schema},
            }
        else:
            # JSON mode does not carry the schema to the model by itself: say it in the
            # prompt (the answer is still checked here against the schema).
            system = (f"{system}\n\nAnswer with one JSON object, and nothing else, that "
                      f"validates against this JSON Schema ({schema_name}):\n"
                      f"{json.dumps(schema, separators=(',', ':'))}")
            response_format = {"type": JSON_OBJECT}
            if mode == JSON_OBJECT_SCHEMA:
                response_format["schema"] = grammar_hint(schema)
        body: dict[str, Any] = {
            "model": self.model,
            "messages": [
                {"role": "system", "content": system},
                {"role": "user", "content": user},
            ],
            "temperature": 0,
            "response_format": response_format,
        }
        max_tokens = self.max_tokens if max_tokens is None else max_tokens
        if max_tokens:
            body["max_tokens"] = max_tokens
        return body

    def _headers(self) -> dict[str, str]:
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        headers.update(self._extra_headers)
        if self._api_key:
            headers["Authorization"] = f"Bearer {self._api_key}"
        return headers

    def complete_json(
        self,
        *,
        system: str,
        user: str,
        schema: dict[str, Any],
        schema_name: str,
        timeout: float | None = None,
        total_timeout: float | None = None,
    ) -> dict[str, Any]:
        return self._metered(system=system, user=user, schema=schema, schema_name=schema_name,
                             timeout=timeout, total_timeout=total_timeout)

    def probe(self, *, timeout: float | None = None) -> str:
        """Find the response format this server takes with one tiny call (no retries;
        a refused rung costs one more request): returns it, or ``unsupported``. A server
        that cannot be asked raises :class:`ProviderError`. Metered like any call (as
        ``structured_output_probe``, attributed to no Account)."""
        try:
            self._metered(system=PROBE_SYSTEM, user=PROBE_USER, schema=PROBE_SCHEMA,
                          schema_name=PROBE_PURPOSE, timeout=timeout, total_timeout=None,
                          retries=0, max_tokens=PROBE_MAX_TOKENS)
        except ProviderError as error:
            # The server took the format but the model's answer did not check out: that
            # is the model, not the server, and calls will validate and retry.
            if error.unsupported:
                return UNSUPPORTED
            if error.kind != "invalid_response":
                raise
        return _FORMATS.get(self.base_url, UNSUPPORTED)

    def _metered(self, *, system: str, user: str, schema: dict[str, Any], schema_name: str,
                 timeout: float | None, total_timeout: float | None,
                 retries: int | None = None, max_tokens: int | None = None) -> dict[str, Any]:
        tokens = TokenUsage()
        started = time.monotonic()
        outcome = "ok"
        ends = None if total_timeout is None else started + max(0.0, float(total_timeout))
        try:
            return self._complete(system=system, user=user, schema=schema,
                                  schema_name=schema_name, timeout=timeout, tokens=tokens,
                                  ends=ends, retries=retries, max_tokens=max_tokens)
        except ProviderError as error:
            outcome = error.kind
            raise
        finally:
            _meter(purpose=schema_name, outcome=outcome, tokens=tokens,
                   seconds=time.monotonic() - started)

    def _complete(
        self,
        *,
        system: str,
        user: str,
        schema: dict[str, Any],
        schema_name: str,
        timeout: float | None,
        tokens: TokenUsage,
        ends: float | None = None,
        retries: int | None = None,
        max_tokens: int | None = None,
    ) -> dict[str, Any]:
        mode = self.response_format

        def body_for(mode: str) -> dict[str, Any]:
            return self.request_body(system=system, user=user, schema=schema,
                                     schema_name=schema_name, mode=mode, max_tokens=max_tokens)

        body = body_for(mode)
        per_attempt = self.timeout if timeout is None else float(timeout)
        attempts_allowed = (self.max_retries if retries is None else retries) + 1
        last: ProviderError | None = None
        refused: list[str] = []
        attempt = 0
        with httpx.Client(
            timeout=httpx.Timeout(per_attempt), transport=self._transport, follow_redirects=False
        ) as client:
            while attempt < attempts_allowed:
                attempt += 1
                if last is not None:
                    delay = self._delay(attempt - 1, last)
                    if ends is not None and time.monotonic() + delay >= ends:
                        raise last  # no time for another attempt: the last failure stands
                    self._sleep(delay)
                attempt_timeout = per_attempt
                if ends is not None:
                    left = ends - time.monotonic()
                    if left <= 0:
                        raise ProviderError("timeout", "no time left for the call",
                                            attempts=tokens.attempts)
                    attempt_timeout = min(per_attempt, left)
                tokens.attempts += 1
                try:
                    value = self._attempt(client, body, schema, tokens, attempt_timeout)
                except ProviderError as error:
                    error.attempts = tokens.attempts
                    if _format_refused(error):
                        refused.append(mode)
                        lower = _next_rung(refused)
                        if lower is None:
                            _FORMATS[self.base_url] = UNSUPPORTED
                            raise ProviderError(
                                "http_error",
                                "the provider takes no structured output: it refused "
                                f"response_format {', '.join(refused)} ({error.message})",
                                status_code=error.status_code, attempts=tokens.attempts,
                                unsupported=True,
                            ) from error
                        # Ask again at once in the next form (a refusal is no failed
                        # attempt of the call, and costs no retry).
                        mode, body = lower, body_for(lower)
                        attempt, last = attempt - 1, None
                        continue
                    if error.kind == "invalid_response":
                        _FORMATS[self.base_url] = mode  # the server took the format
                    if not error.retryable:
                        raise
                    last = error
                else:
                    _FORMATS[self.base_url] = mode
                    return value
        assert last is not None
        raise last

    def _delay(self, retry_number: int, error: ProviderError) -> float:
        base = min(self.backoff_seconds * (2 ** (retry_number - 1)), self.max_backoff_seconds)
        if error.retry_after is not None:
            base = max(base, min(error.retry_after, self.max_backoff_seconds))
        return base + random.uniform(0, base * 0.1) if base > 0 else 0.0

    def _attempt(
        self, client: httpx.Client, body: dict[str, Any], schema: dict[str, Any],
        tokens: TokenUsage | None = None, timeout: float | None = None,
    ) -> dict[str, Any]:
        try:
            response = client.post(self.endpoint, json=body, headers=self._headers(),
                                   timeout=httpx.Timeout(timeout or self.timeout))
        except httpx.TimeoutException as exc:
            raise ProviderError(
                "timeout", f"no answer from the provider in time ({type(exc).__name__})",
                retryable=True,
            ) from exc
        except httpx.RequestError as exc:
            raise ProviderError(
                "connection", f"could not reach the provider ({type(exc).__name__})",
                retryable=True,
            ) from exc

        status = response.status_code
        if status == 429 or status >= 500:
            raise ProviderError(
                "http_error", f"provider answered HTTP {status}{_error_detail(response)}",
                status_code=status, retryable=True, retry_after=_retry_after(response),
            )
        if not 200 <= status < 300:
            raise ProviderError(
                "http_error", f"provider answered HTTP {status}{_error_detail(response)}",
                status_code=status, retryable=False,
            )
        return self._parse(response, schema, tokens)

    def _parse(self, response: httpx.Response, schema: dict[str, Any],
               tokens: TokenUsage | None = None) -> dict[str, Any]:
        def invalid(message: str) -> ProviderError:
            return ProviderError("invalid_response", message, retryable=True)

        try:
            payload = response.json()
        except ValueError as exc:
            raise invalid("response body is not JSON") from exc
        if tokens is not None and isinstance(payload, dict):
            tokens.add(payload.get("usage"))  # billed even when the content is unusable
        try:
            message = payload["choices"][0]["message"]
        except (KeyError, IndexError, TypeError) as exc:
            raise invalid("response has no choices[0].message") from exc
        if not isinstance(message, dict):
            raise invalid("choices[0].message is not an object")
        content = message.get("content")
        if isinstance(content, list):  # content parts
            content = "".join(
                part.get("text", "") for part in content if isinstance(part, dict)
            )
        if not isinstance(content, str) or not content.strip():
            if message.get("refusal"):
                raise invalid("the model refused to answer")
            raise invalid("choices[0].message.content is empty")
        try:
            value = _parse_content(content)
        except ValueError as exc:
            raise invalid(f"message content is not valid JSON ({exc})") from exc
        if not isinstance(value, dict):
            raise invalid("message content is not a JSON object")
        try:
            validate_json(value, schema)
        except SchemaValidationError as exc:
            raise invalid(f"message content violates the schema at {exc}") from exc
        return value


class TokenUsage:
    """Tokens one logical call consumed over all its attempts, as the provider reported
    them in ``usage`` (OpenAI wire format); ``reported`` is false when it never did."""

    def __init__(self) -> None:
        self.prompt = 0
        self.completion = 0
        self.reported = False
        self.attempts = 0

    @property
    def total(self) -> int:
        return self.prompt + self.completion

    def add(self, usage: Any) -> None:
        if not isinstance(usage, dict):
            return
        prompt, completion = usage.get("prompt_tokens"), usage.get("completion_tokens")
        if isinstance(prompt, int) and not isinstance(prompt, bool) and prompt >= 0:
            self.prompt += prompt
            self.reported = True
        if isinstance(completion, int) and not isinstance(completion, bool) and completion >= 0:
            self.completion += completion
            self.reported = True


def _meter(*, purpose: str, outcome: str, tokens: TokenUsage, seconds: float) -> None:
    """Bill one call; metering never changes the outcome of the call it meters."""
    try:
        from memhouse.core.metering import record_model_call

        record_model_call(purpose=purpose, outcome=outcome, attempts=tokens.attempts,
                          prompt_tokens=tokens.prompt, completion_tokens=tokens.completion,
                          tokens_reported=tokens.reported, seconds=seconds)
    except Exception:  # pragma: no cover - the ledger write logs its own failures
        logging.getLogger(__name__).exception("model call metering failed")


JSON_SCHEMA, JSON_OBJECT_SCHEMA, JSON_OBJECT = "json_schema", "json_object_schema", "json_object"
# The negotiation ladder, most constrained first; UNSUPPORTED: the server refused them all.
FORMATS: tuple[str, ...] = (JSON_SCHEMA, JSON_OBJECT_SCHEMA, JSON_OBJECT)
UNSUPPORTED = "unsupported"
# base URL -> the response format its server took last, or UNSUPPORTED (per process).
_FORMATS: dict[str, str] = {}
_FORMAT_WORDS = re.compile(r"response_format|json_schema|json_object|structured output|"
                           r"response format", re.I)


def _format_refused(error: ProviderError) -> bool:
    """The server refused the response format (a 4xx or 5xx whose message names it), as
    servers without structured outputs do: llama-cpp-python answers HTTP 500 with its
    request validation error, others 400 or 422."""
    return (error.kind == "http_error" and error.status_code in (400, 415, 422, 500, 501)
            and bool(_FORMAT_WORDS.search(error.message)))


# Size bounds above this are left out of the schema sent as a grammar: llama.cpp expands
# {m,n} repetitions into nested rules, refuses more than 2000 of them, and
# llama-cpp-python 0.3.36 then crashes (segfault) instead of answering an error.
GRAMMAR_MAX_REPETITION = 256
_SIZE_WORDS = ("maxLength", "minLength", "maxItems", "minItems", "maxProperties",
               "minProperties")


def grammar_hint(schema: Any) -> Any:
    """``schema`` for servers that build a grammar from it, without size bounds above
    :data:`GRAMMAR_MAX_REPETITION` (the answer is still validated against the full one)."""
    if isinstance(schema, list):
        return [grammar_hint(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    return {key: grammar_hint(value) for key, value in schema.items()
            if not (key in _SIZE_WORDS and isinstance(value, int)
                    and value > GRAMMAR_MAX_REPETITION)}


def _next_rung(refused: list[str]) -> str | None:
    """The most constrained rung not refused during this call (a call that started from a
    remembered lower rung tries the upper ones too before giving up), or None."""
    return next((mode for mode in FORMATS if mode not in refused), None)


def structured_output(base_url: str) -> str | None:
    """What this process knows of the server at ``base_url``: the response format it took
    last (:data:`FORMATS`), ``unsupported``, or None before any call."""
    return _FORMATS.get(base_url.rstrip("/"))


# The readiness probe: a tiny call whose only question is which format the server takes.
PROBE_PURPOSE = "structured_output_probe"
PROBE_SYSTEM = "You check that structured output works. Answer with JSON only."
PROBE_USER = 'Answer {"ok": true}.'
PROBE_SCHEMA: dict[str, Any] = {"type": "object", "additionalProperties": False,
                                "required": ["ok"], "properties": {"ok": {"type": "boolean"}}}
PROBE_MAX_TOKENS = 16
# /readyz waits this long for a probe, then answers "probing" (a cold CPU model can take
# longer than a health check's timeout); the probe goes on in its own thread.
PROBE_WAIT_SECONDS = 5.0
# How long a probe's answer stands: a settled one (ok/unsupported) for minutes, a failure
# to ask for seconds; so probes cost one tiny model call per process per 5 min. A stale
# answer is still reported while the next probe runs.
READY_TTL_SECONDS, RETRY_TTL_SECONDS = 300.0, 30.0
_READINESS: dict[str, tuple[float, str, str | None]] = {}
_PROBES: dict[str, threading.Thread] = {}
_PROBES_LOCK = threading.Lock()


def _probe_into_cache(provider: OpenAICompatibleProvider) -> None:
    format_: str | None = None
    try:
        found = provider.probe()
    except ProviderError as error:
        check = ("rejected" if error.kind == "http_error" and error.status_code is not None
                 and 400 <= error.status_code < 500 and error.status_code not in (408, 429)
                 else "degraded")
    except Exception:  # a probe reports, it does not raise
        logging.getLogger(__name__).exception("structured output probe failed")
        check = "degraded"
    else:
        check = "ok" if found in FORMATS else "unsupported"
        format_ = found if found in FORMATS else None
    ttl = READY_TTL_SECONDS if check in ("ok", "unsupported") else RETRY_TTL_SECONDS
    _READINESS[provider.base_url] = (time.monotonic() + ttl, check, format_)


def readiness(provider: OpenAICompatibleProvider,
              wait: float | None = None) -> tuple[str, str | None]:
    """(check, response format) of ``provider`` for ``/readyz``. ``check`` is ``ok``,
    ``unsupported`` (no structured output at all), ``rejected`` (a 4xx: key, model name
    or URL wrong, so no call can succeed), ``degraded`` (unreachable, timing out, 429 or
    5xx: calls fail for now and every feature falls back to its model-free path) or
    ``probing`` (the first probe has not answered within ``wait`` seconds, by default
    :data:`PROBE_WAIT_SECONDS`)."""
    cached = _READINESS.get(provider.base_url)
    if cached is not None and cached[0] > time.monotonic():
        return cached[1], cached[2]
    with _PROBES_LOCK:
        probe = _PROBES.get(provider.base_url)
        if probe is None or not probe.is_alive():
            probe = threading.Thread(target=_probe_into_cache, args=(provider,), daemon=True,
                                     name="memhouse-llm-probe")
            _PROBES[provider.base_url] = probe
            probe.start()
    probe.join(PROBE_WAIT_SECONDS if wait is None else wait)
    cached = _READINESS.get(provider.base_url)  # fresh, or stale while the probe runs
    return (cached[1], cached[2]) if cached is not None else ("probing", None)


def _error_detail(response: httpx.Response) -> str:
    """A short, key-free description of a provider error body."""
    try:
        payload = response.json()
    except ValueError:
        return ""
    detail: Any = None
    if isinstance(payload, dict):  # OpenAI's {"error": ...}, or FastAPI's {"detail": ...}
        detail = payload.get("error") or payload.get("detail")
    if isinstance(detail, dict):
        detail = detail.get("message") or detail.get("type")
    if isinstance(detail, list):  # request validation errors
        detail = json.dumps(detail)
    if not isinstance(detail, str) or not detail:
        return ""
    detail = " ".join(detail.split())
    return f": {detail[:200]}"


def _retry_after(response: httpx.Response) -> float | None:
    value = response.headers.get("retry-after")
    if value is None:
        return None
    try:
        seconds = float(value)
    except ValueError:
        return None
    return seconds if seconds >= 0 and math.isfinite(seconds) else None


def get_provider() -> ChatProvider | None:
    """The configured generation provider, or ``None`` when none is configured.

    Settings: ``MEMHOUSE_LLM_BASE_URL`` (empty = no provider), ``MEMHOUSE_LLM_MODEL``
    (required when a base URL is set), ``MEMHOUSE_LLM_API_KEY`` (optional),
    ``MEMHOUSE_LLM_TIMEOUT`` (seconds per attempt, default 30), the optional
    ``MEMHOUSE_LLM_MAX_RETRIES`` (default 2) and ``MEMHOUSE_LLM_MAX_TOKENS`` (0: no
    ``max_tokens`` is sent, as OpenAI's newer models refuse it; set it for local servers,
    where a small model can otherwise generate until its context is full).
    """
    from django.conf import settings
    from django.core.exceptions import ImproperlyConfigured

    base_url = str(getattr(settings, "MEMHOUSE_LLM_BASE_URL", "") or "").strip()
    if not base_url:
        return None
    model = str(getattr(settings, "MEMHOUSE_LLM_MODEL", "") or "").strip()
    if not model:
        raise ImproperlyConfigured("MEMHOUSE_LLM_MODEL must be set when MEMHOUSE_LLM_BASE_URL is")
    api_key = str(getattr(settings, "MEMHOUSE_LLM_API_KEY", "") or "").strip() or None
    raw_timeout = getattr(settings, "MEMHOUSE_LLM_TIMEOUT", DEFAULT_TIMEOUT_SECONDS)
    timeout = float(raw_timeout) if raw_timeout not in (None, "") else DEFAULT_TIMEOUT_SECONDS
    raw_retries = getattr(settings, "MEMHOUSE_LLM_MAX_RETRIES", DEFAULT_MAX_RETRIES)
    max_retries = int(raw_retries) if raw_retries not in (None, "") else DEFAULT_MAX_RETRIES
    raw_max_tokens = getattr(settings, "MEMHOUSE_LLM_MAX_TOKENS", 0)
    max_tokens = int(raw_max_tokens) if raw_max_tokens not in (None, "") else 0
    return OpenAICompatibleProvider(
        base_url, model, api_key=api_key, timeout=timeout, max_retries=max_retries,
        max_tokens=max_tokens or None,
    )
