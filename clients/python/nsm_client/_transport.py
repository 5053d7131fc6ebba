"""HTTP over the standard library (urllib): the token, multipart uploads streamed from disk, typed errors and the
spec's retry rule (part 7: retry 429, 502, 503 and 504 with exponential backoff, honouring Retry-After; never other
4xx), bounded and configurable.

Calls that may cost a credit (POST /denoise, /denoise/batch, /jobs) are retried only when the server said it did not
process them: a 429 (refused before the credit is charged), or a 502/503/504 in the gateway's own error envelope (the
gateway answered, and it refunds every call that did not deliver a result). A bare 502/504 from a proxy in front, or
a connection that broke after the upload went out, may hide a call that was processed and charged: not retried.
Calls that charge nothing (GET, DELETE, stream tickets) are also retried after connection failures.
"""
from __future__ import annotations

import http.client
import io
import json
import os
import random
import socket
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
from dataclasses import dataclass
from typing import Any, BinaryIO, Callable, Dict, List, Mapping, Optional, Sequence, Tuple, Union

from .errors import ConnectionError, NsmError, error_from_response, is_gateway_envelope

RETRY_STATUSES = frozenset({429, 502, 503, 504})

#: What can be uploaded: a path, bytes, a binary file object, or (name, bytes-or-path-or-file).
FileInput = Union[str, "os.PathLike[str]", bytes, bytearray, memoryview, BinaryIO, Tuple[str, Any]]


@dataclass
class RetryPolicy:
    """Bounds of the retry rule. ``max_retries=0`` turns retries off."""

    max_retries: int = 4
    base_delay: float = 0.5
    max_delay: float = 20.0
    #: A Retry-After longer than this (seconds) is not waited for: the error is raised at once.
    max_retry_after: float = 60.0


@dataclass
class RetryEvent:
    method: str
    path: str
    attempt: int
    delay: float
    status: Optional[int]
    error: NsmError


class _Segments(io.RawIOBase):
    """A multipart body read piece by piece: bytes held in memory and files read from disk as the upload goes out."""

    def __init__(self, pieces: Sequence[Union[bytes, Tuple[str, int]]]) -> None:
        super().__init__()
        self._pieces = list(pieces)
        self._index = 0
        self._offset = 0
        self._file: Optional[BinaryIO] = None

    def readable(self) -> bool:
        return True

    def read(self, size: int = -1) -> bytes:  # type: ignore[override]
        if size is None or size < 0:
            size = 1 << 62
        out = bytearray()
        while len(out) < size and self._index < len(self._pieces):
            piece = self._pieces[self._index]
            if isinstance(piece, bytes):
                chunk = piece[self._offset:self._offset + size - len(out)]
                self._offset += len(chunk)
                done = self._offset >= len(piece)
            else:
                if self._file is None:
                    self._file = open(piece[0], "rb")
                chunk = self._file.read(min(size - len(out), 1 << 20))
                done = not chunk
                if done:
                    self._file.close()
                    self._file = None
            out += chunk
            if done:
                self._index += 1
                self._offset = 0
        return bytes(out)

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None
        super().close()


@dataclass
class PreparedFile:
    filename: str
    #: bytes in memory, or a path read while uploading
    data: Optional[bytes]
    path: Optional[str]
    size: int


def prepare_file(value: Any, fallback: str = "audio") -> PreparedFile:
    """The name and content of an upload."""
    if isinstance(value, tuple):
        name, inner = value
        p = prepare_file(inner, fallback)
        p.filename = name
        return p
    if isinstance(value, (str, os.PathLike)):
        path = os.fspath(value)
        return PreparedFile(os.path.basename(path) or fallback, None, path, os.path.getsize(path))
    if isinstance(value, (bytes, bytearray, memoryview)):
        data = bytes(value)
        return PreparedFile(fallback, data, None, len(data))
    if hasattr(value, "read"):
        data = value.read()
        name = os.path.basename(getattr(value, "name", "") or "") or fallback
        return PreparedFile(name, data, None, len(data))
    raise TypeError(f"cannot upload a {type(value).__name__}: give a path, bytes or a binary file")


def multipart(fields: Mapping[str, Any], file_field: str, files: Sequence[PreparedFile],
              more_files: Sequence[Tuple[str, PreparedFile]] = ()) -> Tuple[Callable[[], _Segments], int, str]:
    """A multipart/form-data body (fields first, then the files under ``file_field``, then ``more_files``, each under
    its own field name): a factory of readers, its length, its type."""
    boundary = "----nsm-client-" + uuid.uuid4().hex
    pieces: List[Union[bytes, Tuple[str, int]]] = []
    for name, value in fields.items():
        if value is None:
            continue
        if isinstance(value, bool):
            value = "true" if value else "false"
        pieces.append(
            f'--{boundary}\r\nContent-Disposition: form-data; name="{name}"\r\n\r\n{value}\r\n'.encode("utf-8"))
    for field, f in [*((file_field, f) for f in files), *more_files]:
        safe = f.filename.replace("\\", "_").replace('"', "%22").replace("\r", "").replace("\n", "")
        pieces.append(
            (f'--{boundary}\r\nContent-Disposition: form-data; name="{field}"; filename="{safe}"\r\n'
             "Content-Type: application/octet-stream\r\n\r\n").encode("utf-8"))
        pieces.append(f.data if f.data is not None else (f.path or "", f.size))
        pieces.append(b"\r\n")
    pieces.append(f"--{boundary}--\r\n".encode("ascii"))
    length = sum(len(p) if isinstance(p, bytes) else p[1] for p in pieces)
    return (lambda: _Segments(pieces)), length, f"multipart/form-data; boundary={boundary}"


class Response:
    """A successful answer whose body is read by the caller (``read``) or at once (``body``)."""

    def __init__(self, raw: http.client.HTTPResponse) -> None:
        self.raw = raw
        self.status: int = raw.status
        self.headers = raw.headers
        self._body: Optional[bytes] = None

    @property
    def body(self) -> bytes:
        if self._body is None:
            try:
                self._body = self.raw.read()
            finally:
                self.raw.close()
        return self._body

    def json(self) -> Any:
        return json.loads(self.body)

    def json_header(self, name: str) -> Any:
        value = self.headers.get(name)
        if value is None:
            return None
        try:
            return json.loads(value)
        except ValueError:
            return None


class Transport:
    def __init__(self, base_url: str, token: Optional[str], retry: Optional[RetryPolicy],
                 on_retry: Optional[Callable[[RetryEvent], None]], timeout: float) -> None:
        base = base_url.rstrip("/")
        if base.endswith("/v1/noise-suppressor"):
            base = base[: -len("/v1/noise-suppressor")]
        self.base_url = base
        self.token = token
        self.retry = retry if retry is not None else RetryPolicy()
        self.on_retry = on_retry
        self.timeout = timeout

    def url(self, path: str, query: Optional[Mapping[str, Any]] = None) -> str:
        url = self.base_url + path
        q = {k: ("true" if v is True else "false" if v is False else v) for k, v in (query or {}).items() if v is not None}
        return url + ("?" + urllib.parse.urlencode(q) if q else "")

    def auth_headers(self) -> Dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"} if self.token else {}

    def request(self, method: str, path: str, *, query: Optional[Mapping[str, Any]] = None,
                headers: Optional[Mapping[str, str]] = None,
                body: Optional[Tuple[Callable[[], Any], int, str]] = None,
                charged: bool = False, accept: Sequence[int] = ()) -> Response:
        """One call with retries: a successful Response (or one whose status is in ``accept``), else an NsmError."""
        attempt = 0
        while True:
            h = {"User-Agent": "nsm-client-python/1.0.0", **self.auth_headers(), **(headers or {})}
            data = None
            if body is not None:
                factory, length, content_type = body
                data = factory()
                h["Content-Type"] = content_type
                h["Content-Length"] = str(length)
            req = urllib.request.Request(self.url(path, query), data=data, headers=h, method=method)
            try:
                raw = urllib.request.urlopen(req, timeout=self.timeout)
                return Response(raw)
            except urllib.error.HTTPError as exc:
                raw_body = exc.read() if exc.fp is not None else b""
                exc.close()
                if exc.code in accept:
                    r = Response(exc)  # type: ignore[arg-type]
                    r._body = raw_body
                    return r
                error = error_from_response(exc.code, exc.headers, raw_body)
                may_retry = exc.code in RETRY_STATUSES and (not charged or exc.code == 429 or is_gateway_envelope(error))
                if not may_retry or not self.backoff(method, path, attempt, error):
                    raise error from None
            except (urllib.error.URLError, http.client.HTTPException, socket.timeout, OSError) as exc:
                reason = getattr(exc, "reason", exc)
                error = ConnectionError("connection_failed", f"{method} {path}: {reason}")
                if charged or not self.backoff(method, path, attempt, error):
                    raise error from None
            finally:
                if data is not None:
                    data.close()
            attempt += 1

    def retry_delay(self, method: str, path: str, attempt: int, error: NsmError) -> Optional[float]:
        """Seconds to wait before retry ``attempt + 1`` (reported to ``on_retry``); None when none is left or
        Retry-After is longer than allowed."""
        if attempt >= self.retry.max_retries:
            return None
        if error.retry_after is not None:
            if error.retry_after > self.retry.max_retry_after:
                return None
            delay = error.retry_after + random.random() * 0.25
        else:
            cap = min(self.retry.max_delay, self.retry.base_delay * 2 ** attempt)
            delay = cap / 2 + random.random() * cap / 2
        if self.on_retry is not None:
            self.on_retry(RetryEvent(method, path, attempt + 1, delay, error.status, error))
        return delay

    def backoff(self, method: str, path: str, attempt: int, error: NsmError) -> bool:
        """Sleeps before retry ``attempt + 1``; False when none is left."""
        delay = self.retry_delay(method, path, attempt, error)
        if delay is None:
            return False
        time.sleep(delay)
        return True
