"""Errors as typed classes: every failure the API reports becomes an NsmError subclass chosen by HTTP status,
carrying the server's error type, message, request id and Retry-After."""
from __future__ import annotations

import email.utils
import json
import time
from typing import Any, Mapping, Optional


class NsmError(Exception):
    """A failure reported by the API (or a connection that gave no answer)."""

    def __init__(
        self,
        type: str,
        message: str,
        *,
        status: Optional[int] = None,
        request_id: Optional[str] = None,
        retry_after: Optional[float] = None,
        body: Any = None,
        close_code: Optional[int] = None,
    ) -> None:
        super().__init__(message)
        #: The server's error type (``rate_limited``, ``invalid_audio``, ...): branch on this.
        self.type = type
        self.message = message
        #: HTTP status; None for a connection failure or a mid-stream error.
        self.status = status
        #: The X-Request-Id of the call (quote it in support requests).
        self.request_id = request_id
        #: Seconds the server asked to wait (Retry-After), if it said.
        self.retry_after = retry_after
        #: The parsed error body as the server sent it.
        self.body = body
        #: WebSocket close code, for errors of a live stream.
        self.close_code = close_code

    def __str__(self) -> str:
        where = f" [{self.request_id}]" if self.request_id else ""
        status = f"{self.status} " if self.status else ""
        return f"{status}{self.type}: {self.message}{where}"


class InvalidRequestError(NsmError):
    """400, 405, 416, 422: the request or its audio was refused (nothing was charged)."""


class AuthenticationError(NsmError):
    """401: the token is missing, unknown, revoked or expired."""


class QuotaExhaustedError(NsmError):
    """402: the workspace's credits are used up."""


class PermissionDeniedError(NsmError):
    """403: scope, IP allow-list or plan."""


class NotFoundError(NsmError):
    """404: no such endpoint, job or sample."""


class RequestTimeoutError(NsmError):
    """408: the upload stalled."""


class ConflictError(NsmError):
    """409: a job's result was asked for before the job succeeded."""


class GoneError(NsmError):
    """410: a job's result was deleted."""


class PayloadTooLargeError(NsmError):
    """413: the upload is larger than the endpoint takes."""


class RateLimitError(NsmError):
    """429: rate limit, too many active jobs or too many streams; ``retry_after`` says when to come back."""


class ServerError(NsmError):
    """500, 502, 503, 504, 507: the service could not do it now."""


class ConnectionError(NsmError):  # noqa: A001 - the API's name for it; builtins.ConnectionError stays reachable
    """No HTTP answer: refused, reset or cut connection, DNS failure."""


class StreamError(NsmError):
    """A live stream ended in an error message or an abnormal close."""


_BY_STATUS = {
    400: InvalidRequestError,
    405: InvalidRequestError,
    416: InvalidRequestError,
    422: InvalidRequestError,
    426: InvalidRequestError,
    401: AuthenticationError,
    402: QuotaExhaustedError,
    403: PermissionDeniedError,
    404: NotFoundError,
    408: RequestTimeoutError,
    409: ConflictError,
    410: GoneError,
    413: PayloadTooLargeError,
    429: RateLimitError,
}


def parse_retry_after(value: Optional[str]) -> Optional[float]:
    """Seconds from a Retry-After header (delta-seconds or an HTTP date), or None."""
    if value is None or not value.strip():
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


def error_from_response(status: int, headers: Mapping[str, str], raw: bytes) -> NsmError:
    """The error for an HTTP answer that is not a success."""
    text = raw.decode("utf-8", "replace")
    body: Any = text
    err_type = f"http_{status}"
    message = text[:500] or f"HTTP {status}"
    request_id = headers.get("X-Request-Id")
    try:
        body = json.loads(text)
    except ValueError:
        pass
    if isinstance(body, dict):
        envelope = body.get("error")
        if isinstance(envelope, dict) and isinstance(envelope.get("type"), str):
            err_type = envelope["type"]
            message = str(envelope.get("message", message))
            request_id = envelope.get("request_id") or request_id
        elif isinstance(body.get("detail"), str):
            err_type = body.get("type") if isinstance(body.get("type"), str) else ("invalid_audio" if status == 422 else "invalid_request")
            message = body["detail"]
            request_id = body.get("request_id") or request_id
    cls = _BY_STATUS.get(status) or (ServerError if status >= 500 else NsmError)
    return cls(err_type, message, status=status, request_id=request_id,
               retry_after=parse_retry_after(headers.get("Retry-After")), body=body)


def is_gateway_envelope(err: NsmError) -> bool:
    """Whether the body is the gateway's own envelope (the gateway answered, so its refund rule applies)."""
    return isinstance(err.body, dict) and isinstance(err.body.get("error"), dict) and isinstance(err.body["error"].get("type"), str)
