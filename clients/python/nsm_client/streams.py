"""Live streams (GET /v1/noise-suppressor/stream over a WebSocket) with asyncio and the optional ``websockets``
package (Debian's python3-websockets 10.4 and later; both its legacy client and the newer asyncio client).

PCM goes in, denoised PCM comes out in order (output sample n is input sample n; total output = total input).
Writes are cut into whole sample frames, optionally paced in real time, and sent in order; ``end()`` sends
``{"type":"end"}`` after them and returns the server's ``done`` once all output has arrived. Every text message the
server sends (ready, done, error, and types added later such as speech_start / speech_end) reaches ``on_message``
and ``messages``; nothing unknown is dropped.
"""
from __future__ import annotations

import asyncio
import json
import time
from typing import Any, Awaitable, Callable, Dict, List, Optional, Tuple

from ._transport import RETRY_STATUSES, Transport
from .errors import NsmError, StreamError, error_from_response

NS = "/v1/noise-suppressor"
SAMPLE_BYTES = {"pcm_s16le": 2, "pcm_f32le": 4, "mulaw": 1, "pcm_mulaw": 1, "alaw": 1, "pcm_alaw": 1}
_MAX_MESSAGE = 64 * 1024


def _import_websockets() -> Any:
    try:
        import websockets  # type: ignore[import-not-found]
    except ImportError as exc:  # pragma: no cover - depends on the machine
        raise NsmError("no_websocket", "live streams need the websockets package "
                       "(pip install websockets, or apt-get install python3-websockets)") from exc
    return websockets


async def _connect(url: str, headers: Dict[str, str]) -> Any:
    """Opens the WebSocket; a refused upgrade raises the API's typed error with the server's body where the
    websockets version lets it be read."""
    websockets = _import_websockets()
    try:
        from websockets.asyncio.client import connect as new_connect  # type: ignore[import-not-found]
    except ImportError:
        new_connect = None
    if new_connect is not None:
        from websockets.exceptions import InvalidStatus  # type: ignore[import-not-found]
        try:
            return await new_connect(url, additional_headers=headers, compression=None, max_size=None)
        except InvalidStatus as exc:
            r = exc.response
            raise error_from_response(r.status_code, r.headers, r.body or b"") from None
        except OSError as exc:
            raise NsmError("connection_failed", str(exc)) from None
    # websockets < 13: the legacy client, whose protocol is subclassed to read the refusal's body.
    from websockets.exceptions import InvalidStatusCode  # type: ignore[import-not-found]
    from websockets.legacy.client import WebSocketClientProtocol, connect as legacy_connect  # type: ignore[import-not-found]

    captured: Dict[str, bytes] = {}

    class _Protocol(WebSocketClientProtocol):  # type: ignore[misc, valid-type]
        async def read_http_response(self) -> Any:
            status, hdrs = await super().read_http_response()
            if status != 101:
                try:
                    n = int(hdrs.get("Content-Length", "0") or 0)
                    if 0 < n <= 1 << 16:
                        captured["body"] = await asyncio.wait_for(self.reader.readexactly(n), 5)
                except Exception:  # the body is a courtesy: the status and headers still tell the error
                    pass
            return status, hdrs

    try:
        return await legacy_connect(url, extra_headers=headers, compression=None, max_size=None,
                                    create_protocol=_Protocol)
    except InvalidStatusCode as exc:
        raise error_from_response(exc.status_code, exc.headers, captured.get("body", b"")) from None
    except OSError as exc:
        raise NsmError("connection_failed", str(exc)) from None


def _close_info(exc: Any) -> Tuple[int, str]:
    rcvd = getattr(exc, "rcvd", None)
    if rcvd is not None:
        return rcvd.code, rcvd.reason
    return getattr(exc, "code", 1006), getattr(exc, "reason", "")


async def _first_message(ws: Any) -> Dict[str, Any]:
    """The server's ``ready``. A stream that could not start sends ``error`` instead, then closes (1011, or 1012 when
    the server is restarting): raised typed, with its close code, as a mid-stream error is; a close before any message
    or anything else first raises a StreamError too."""
    websockets = _import_websockets()
    try:
        raw = await ws.recv()
    except websockets.exceptions.ConnectionClosed as exc:
        code, reason = _close_info(exc)
        raise StreamError("connection_closed", f"stream closed with {code}{f' ({reason})' if reason else ''} before ready",
                          close_code=code) from None
    try:
        first = json.loads(raw) if isinstance(raw, str) else None
    except ValueError:
        first = None
    if isinstance(first, dict) and first.get("type") == "ready":
        return first
    if isinstance(first, dict) and first.get("type") == "error":
        try:
            await asyncio.wait_for(ws.wait_closed(), 5)
        except asyncio.TimeoutError:
            await ws.close()
        e = first.get("error") if isinstance(first.get("error"), dict) else {}
        raise StreamError(str(e.get("type", "stream_error")), str(e.get("message", "stream error")),
                          request_id=e.get("request_id"), body=first, close_code=ws.close_code)
    await ws.close()
    raise StreamError("unexpected_message", f"expected ready, got {str(raw)[:200]}")


class LiveStream:
    """One live stream. Use ``async with client.streams.open(...) as s``; then ``await s.send(pcm)`` and
    ``done = await s.end()``. Output goes to ``on_audio`` when given, else it is collected in ``s.output``."""

    def __init__(self, ws: Any, ready: Dict[str, Any], *, pace: Optional[float], bytes_per_sample: Optional[int],
                 on_audio: Optional[Callable[[bytes], Any]], on_message: Optional[Callable[[Dict[str, Any]], Any]]) -> None:
        self._ws = ws
        #: The server's ``ready`` message.
        self.ready: Dict[str, Any] = ready
        #: Every text message received, in order (ready first).
        self.messages: List[Dict[str, Any]] = [ready]
        #: Denoised audio received, when no ``on_audio`` was given.
        self.output = bytearray()
        self.bytes_sent = 0
        self.bytes_received = 0
        #: The close code once closed (1000 after done).
        self.close_code: Optional[int] = None
        self._on_audio = on_audio
        self._on_message = on_message
        self._pace = pace
        per = bytes_per_sample or SAMPLE_BYTES.get(str(ready.get("encoding")), 1)
        self._unit = per * int(ready.get("channels") or 1)
        self._carry = b""
        self._next_deadline = float("-inf")
        self._done: "asyncio.Future[Dict[str, Any]]" = asyncio.get_running_loop().create_future()
        # Marked as seen here, so a stream closed without end() (whose done fails) logs no "Future exception was never
        # retrieved"; callers still get the error when they await end().
        self._done.add_done_callback(lambda f: None if f.cancelled() else f.exception())
        self._error_message: Optional[Dict[str, Any]] = None
        self._ended = False
        self._reader = asyncio.ensure_future(self._read())

    async def _read(self) -> None:
        websockets = _import_websockets()
        try:
            async for data in self._ws:
                if isinstance(data, (bytes, bytearray)):
                    self.bytes_received += len(data)
                    if self._on_audio is not None:
                        r = self._on_audio(bytes(data))
                        if asyncio.iscoroutine(r):
                            await r
                    else:
                        self.output += data
                    continue
                try:
                    msg = json.loads(data)
                except ValueError:
                    msg = {"type": "unparsed", "text": data}
                if not isinstance(msg, dict) or not isinstance(msg.get("type"), str):
                    msg = {"type": "unparsed", "text": data}
                self.messages.append(msg)
                if msg["type"] == "done" and not self._done.done():
                    self._done.set_result(msg)
                elif msg["type"] == "error":
                    self._error_message = msg
                if self._on_message is not None:
                    r = self._on_message(msg)
                    if asyncio.iscoroutine(r):
                        await r
            code, reason = self._ws.close_code or 1000, self._ws.close_reason or ""
        except websockets.exceptions.ConnectionClosed as exc:
            code, reason = _close_info(exc)
        self.close_code = code
        if not self._done.done():
            self._done.set_exception(self._stream_error(code, reason))

    def _stream_error(self, code: int, reason: str) -> StreamError:
        if self._error_message is not None:
            e = self._error_message.get("error") or {}
            return StreamError(str(e.get("type", "stream_error")), str(e.get("message", "stream error")),
                               request_id=e.get("request_id") or self.ready.get("request_id"),
                               body=self._error_message, close_code=code)
        return StreamError("closed_before_done" if code == 1000 else "connection_closed",
                           f"stream closed with {code}{f' ({reason})' if reason else ''} before done",
                           request_id=self.ready.get("request_id"), close_code=code)

    async def send(self, pcm: bytes) -> None:
        """Sends PCM (any length; whole sample frames go out, the rest waits for the next call)."""
        if self._ended:
            raise NsmError("stream_ended", "send after end()")
        await self._send(bytes(pcm), last=False)

    async def _send(self, pcm: bytes, last: bool) -> None:
        if self._done.done():
            self._done.result()  # raises the stream's error, if that is how it ended
            raise StreamError("stream_finished", "the stream has already ended")
        data = self._carry + pcm
        if last and len(data) % self._unit:
            raise NsmError("invalid_request", f"the audio ends in a partial sample frame ({len(data) % self._unit} of {self._unit} bytes)")
        if self._pace is not None:
            frame = max(self._unit, round(int(self.ready["sample_rate"]) * self._pace / 1000) * self._unit)
            off = 0
            while off + frame <= len(data) or (last and off < len(data)):
                await self._wait_deadline()
                await self._send_binary(data[off:off + frame])
                off += frame
            self._carry = data[off:]
            return
        whole = len(data) - len(data) % self._unit
        step = _MAX_MESSAGE - _MAX_MESSAGE % self._unit
        for off in range(0, whole, step):
            await self._send_binary(data[off:min(whole, off + step)])
        self._carry = data[whole:]

    async def _send_binary(self, b: bytes) -> None:
        await self._ws_send(b)
        self.bytes_sent += len(b)

    async def _ws_send(self, data: Any) -> None:
        """Sends; when the server has closed meanwhile, raises how the stream ended (its error message, its close)."""
        websockets = _import_websockets()
        try:
            await self._ws.send(data)
        except websockets.exceptions.ConnectionClosed:
            await self._reader
            self._done.result()  # raises the stream's error
            raise StreamError("stream_finished", "the stream has already ended")

    async def _wait_deadline(self) -> None:
        # Frame i leaves at start + i × frame; after a pause of the writer (more than 10 frames behind) the clock
        # restarts at now instead of sending the missed time in a burst.
        assert self._pace is not None
        now = time.monotonic() * 1000
        if self._next_deadline < now - 10 * self._pace:
            self._next_deadline = now
        if self._next_deadline > now:
            await asyncio.sleep((self._next_deadline - now) / 1000)
        self._next_deadline += self._pace

    async def send_json(self, message: Dict[str, Any]) -> None:
        """Sends a JSON text message as it is (for control messages added to the protocol later)."""
        await self._ws_send(json.dumps(message))

    async def end(self) -> Dict[str, Any]:
        """Sends what is left, then ``{"type":"end"}``; returns ``done`` once the output is complete."""
        if not self._ended:
            self._ended = True
            await self._send(b"", last=True)
            await self._ws_send(json.dumps({"type": "end"}))
        done = await self._done
        await self._reader
        return done

    async def close(self) -> None:
        """Closes without ending properly (the output so far is all there will be)."""
        self._ended = True
        await self._ws.close()
        try:
            await self._reader
        except Exception:
            pass

    async def __aenter__(self) -> "LiveStream":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        if self.close_code is None:
            await self.close()


class _Opener:
    """``await client.streams.open(...)`` or ``async with client.streams.open(...) as s``."""

    def __init__(self, make: Callable[[], Awaitable[LiveStream]]) -> None:
        self._make = make
        self._stream: Optional[LiveStream] = None

    def __await__(self) -> Any:
        return self._make().__await__()

    async def __aenter__(self) -> LiveStream:
        self._stream = await self._make()
        return self._stream

    async def __aexit__(self, *exc: Any) -> None:
        if self._stream is not None:
            await self._stream.__aexit__(*exc)


class Streams:
    def __init__(self, http: Transport) -> None:
        self._http = http

    def ticket(self) -> Dict[str, Any]:
        """POST /stream/tickets: ``{ticket, expires_at, ttl_s}``, single use within 60 s (for a browser)."""
        return self._http.request("POST", f"{NS}/stream/tickets").json()

    def open(self, *, pace: Optional[float] = None, bytes_per_sample: Optional[int] = None,
             on_audio: Optional[Callable[[bytes], Any]] = None,
             on_message: Optional[Callable[[Dict[str, Any]], Any]] = None, **query: Any) -> _Opener:
        """Opens a live stream. ``query`` goes to the server as it is: model, sample_rate, encoding, channels,
        attenuation_limit_db, ticket, and options added later (e.g. ``encoding="mulaw"``). ``vad=True`` (with
        ``vad_threshold``, ``vad_min_speech_ms``, ``vad_hangover_ms``) adds speech events: ``on_message`` gets
        ``{"type": "speech_start" | "speech_end", "at_ms", "decided_ms"}`` after the audio up to ``at_ms``.
        ``pace=20`` sends 20 ms frames in real time. A refusal with 429/502/503/504 (too many streams, rate limit,
        draining) is retried under the client's retry rule before the error is raised."""

        async def make() -> LiveStream:
            attempt = 0
            while True:
                headers = {} if query.get("ticket") else self._http.auth_headers()
                url = self._http.url(f"{NS}/stream", query).replace("http", "ws", 1)
                try:
                    ws = await _connect(url, headers)
                except NsmError as err:
                    if err.status in RETRY_STATUSES and not query.get("ticket"):
                        delay = self._http.retry_delay("GET", f"{NS}/stream", attempt, err)
                        if delay is not None:
                            await asyncio.sleep(delay)
                            attempt += 1
                            continue
                    raise
                ready = await _first_message(ws)
                stream = LiveStream(ws, ready, pace=pace, bytes_per_sample=bytes_per_sample, on_audio=on_audio, on_message=on_message)
                if on_message is not None:
                    r = on_message(ready)
                    if asyncio.iscoroutine(r):
                        await r
                return stream

        return _Opener(make)

    def denoise_pcm(self, pcm: bytes, *, pace: Optional[float] = None, **query: Any) -> Tuple[bytes, Dict[str, Any]]:
        """Synchronous convenience: sends ``pcm`` through a stream and returns (denoised PCM, done message)."""

        async def run() -> Tuple[bytes, Dict[str, Any]]:
            async with self.open(pace=pace, **query) as s:
                await s.send(pcm)
                done = await s.end()
                return bytes(s.output), done

        return asyncio.run(run())
