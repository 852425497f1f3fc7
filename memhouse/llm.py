"""The one generation-provider interface of MemHouse.

Every model-backed feature (LLM extraction, reranking, ask, dream-time work) talks to a
generation model through :class:`ChatProvider`. The only shipped implementation,
:class:`OpenAICompatibleProvider`, speaks the OpenAI ``/chat/completions`` wire format with
strict structured outputs (``response_format = json_schema``), which OpenAI, Azure OpenAI,
vLLM, llama.cpp server, Ollama and LiteLLM all accept.

Contract of ``complete_json``:

* it returns a ``dict`` that has been validated against ``schema`` by :func:`validate_json`
  (a provider that ignores ``strict`` cannot smuggle a malformed object into the pipeline);
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
    "validate_json",
]

ERROR_KINDS: tuple[str, ...] = ("timeout", "http_error", "invalid_response", "connection")

DEFAULT_TIMEOUT_SECONDS = 30.0
DEFAULT_MAX_RETRIES = 2


class ProviderError(Exception):
    """A generation call failed; ``kind`` says how.

    ``status_code`` is set for ``http_error``; ``attempts`` is how many requests were made;
    ``retryable`` says whether this single failure was of a transient class.
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
        """What this server was last seen to accept: "json_schema" (the default, tried
        first) or "json_object" (the schema then travels in the prompt)."""
        return _FORMATS.get(self.base_url, JSON_SCHEMA)

    def request_body(
        self, *, system: str, user: str, schema: dict[str, Any], schema_name: str,
        mode: str = "json_schema",
    ) -> dict[str, Any]:
        if mode == JSON_OBJECT:
            # Servers without structured outputs (llama.cpp's, LM Studio's older ones)
            # take json_object; the schema goes in the prompt and is still checked here.
            system = (f"{system}\n\nAnswer with one JSON object, and nothing else, that "
                      f"validates against this JSON Schema ({schema_name}):\n"
                      f"{json.dumps(schema, separators=(',', ':'))}")
            response_format: dict[str, Any] = {"type": JSON_OBJECT}
        else:
            response_format = {
                "type": JSON_SCHEMA,
                "json_schema": {"name": schema_name, "strict": True, "schema": schema},
            }
        return {
            "model": self.model,
            "messages": [
                {"role": "system", "content": system},
                {"role": "user", "content": user},
            ],
            "temperature": 0,
            "response_format": response_format,
        }

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
        tokens = TokenUsage()
        started = time.monotonic()
        outcome = "ok"
        ends = None if total_timeout is None else started + max(0.0, float(total_timeout))
        try:
            return self._complete(system=system, user=user, schema=schema,
                                  schema_name=schema_name, timeout=timeout, tokens=tokens,
                                  ends=ends)
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
    ) -> dict[str, Any]:
        mode = self.response_format
        body = self.request_body(system=system, user=user, schema=schema,
                                 schema_name=schema_name, mode=mode)
        per_attempt = self.timeout if timeout is None else float(timeout)
        attempts_allowed = self.max_retries + 1
        last: ProviderError | None = None
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
                    if mode == JSON_SCHEMA and _format_refused(error):
                        # Ask again at once in the form this server takes, and remember it
                        # for this base URL (a refusal is no failed attempt of the call).
                        mode = JSON_OBJECT
                        body = self.request_body(system=system, user=user, schema=schema,
                                                 schema_name=schema_name, mode=mode)
                        attempt, last = attempt - 1, None
                        continue
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
        from memhouse.metering import record_model_call

        record_model_call(purpose=purpose, outcome=outcome, attempts=tokens.attempts,
                          prompt_tokens=tokens.prompt, completion_tokens=tokens.completion,
                          tokens_reported=tokens.reported, seconds=seconds)
    except Exception:  # pragma: no cover - the ledger write logs its own failures
        logging.getLogger(__name__).exception("model call metering failed")


JSON_SCHEMA, JSON_OBJECT = "json_schema", "json_object"
# base URL -> the response format its server accepted last (per process).
_FORMATS: dict[str, str] = {}
_FORMAT_WORDS = re.compile(r"response_format|json_schema|structured output|response format",
                           re.I)


def _format_refused(error: ProviderError) -> bool:
    """The server refused the json_schema response format (a 4xx or 5xx whose message
    names it), as servers without structured outputs do."""
    return (error.kind == "http_error" and error.status_code in (400, 415, 422, 500, 501)
            and bool(_FORMAT_WORDS.search(str(error))))


def _error_detail(response: httpx.Response) -> str:
    """A short, key-free description of a provider error body."""
    try:
        payload = response.json()
    except ValueError:
        return ""
    detail: Any = payload.get("error") if isinstance(payload, dict) else None
    if isinstance(detail, dict):
        detail = detail.get("message") or detail.get("type")
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
    ``MEMHOUSE_LLM_TIMEOUT`` (seconds per attempt, default 30) and the optional
    ``MEMHOUSE_LLM_MAX_RETRIES`` (default 2).
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
    return OpenAICompatibleProvider(
        base_url, model, api_key=api_key, timeout=timeout, max_retries=max_retries
    )
