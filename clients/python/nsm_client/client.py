"""NsmClient: every operation of the Noise Suppression Gateway API (1.0.0 and its extensions: jobs, live streams),
synchronous, over the standard library."""
from __future__ import annotations

import http.client
import re
import socket
import time
import urllib.parse
from dataclasses import dataclass
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence

from ._transport import FileInput, RetryEvent, RetryPolicy, Transport, multipart, prepare_file
from .errors import ConnectionError, NsmError
from .streams import Streams

NS = "/v1/noise-suppressor"
_FINAL = {"succeeded", "failed", "canceled"}


def disposition_name(header: Optional[str]) -> Optional[str]:
    """The file name of a Content-Disposition header (RFC 5987 ``filename*`` first)."""
    if not header:
        return None
    m = re.search(r"filename\*=UTF-8''([^;]+)", header, re.I)
    if m:
        return urllib.parse.unquote(m.group(1))
    m = re.search(r'filename="([^"]*)"', header, re.I) or re.search(r"filename=([^;]+)", header, re.I)
    return m.group(1).strip() if m else None


class DenoisedAudio(bytes):
    """The cleaned audio file (it is ``bytes``), with what the server said about it."""

    stats: Dict[str, Any]
    filename: Optional[str]
    content_type: Optional[str]
    request_id: Optional[str]


class BatchZip(bytes):
    """denoised.zip (it is ``bytes``), with the X-NS-Batch summary."""

    summary: Dict[str, Any]
    request_id: Optional[str]


@dataclass
class DownloadResult:
    #: Bytes of the result.
    bytes: int
    #: How many times the download resumed after a broken connection.
    resumes: int
    #: The server's file name, e.g. podcast_denoised.wav.
    filename: Optional[str]
    content_type: Optional[str]
    #: The file written (``to=``), or None.
    path: Optional[str] = None
    #: The result when no ``to`` was given.
    data: Optional[bytes] = None


def _fields(options: Dict[str, Any]) -> Dict[str, Any]:
    # Every option goes to the server as it is named in the API, so fields added later work before this client knows them.
    return {k: v for k, v in options.items() if v is not None}


class Jobs:
    """Asynchronous jobs: submit, get, list, wait, cancel, download (with Range resumes)."""

    def __init__(self, http: Transport) -> None:
        self._http = http

    def submit(self, file: Optional[FileInput] = None, *, url: Optional[str] = None,
               echo_reference: Optional[FileInput] = None, **options: Any) -> Dict[str, Any]:
        """POST /jobs with a file (path, bytes, binary file) or ``url=`` for the server to fetch. 1 credit, refunded if
        the job fails or is canceled. Options: model, attenuation_limit_db, output_format, keep_input_sample_rate,
        loudness_lufs, webhook_url, echo_reference_url; ``echo_reference=`` uploads what the loudspeaker played
        (its echo is removed first: docs/echo.md)."""
        if (file is None) == (url is None):
            raise ValueError("give a file or url=, not both")
        fields = _fields(options)
        if url is not None:
            fields["url"] = url
        files = [prepare_file(file)] if file is not None else []
        more = [("echo_reference", prepare_file(echo_reference, "reference"))] if echo_reference is not None else []
        res = self._http.request("POST", f"{NS}/jobs", body=multipart(fields, "file", files, more), charged=True)
        return res.json()

    def get(self, job_id: str) -> Dict[str, Any]:
        """GET /jobs/{id}."""
        return self._http.request("GET", f"{NS}/jobs/{urllib.parse.quote(job_id)}").json()

    def list(self, status: Optional[str] = None, limit: Optional[int] = None, cursor: Optional[str] = None) -> Dict[str, Any]:
        """GET /jobs: one page ``{object, jobs, has_more, next_cursor}``, newest first."""
        return self._http.request("GET", f"{NS}/jobs", query={"status": status, "limit": limit, "cursor": cursor}).json()

    def list_all(self, status: Optional[str] = None, limit: Optional[int] = None) -> Iterator[Dict[str, Any]]:
        """Every job (matching ``status``), page after page."""
        cursor = None
        while True:
            page = self.list(status=status, limit=limit, cursor=cursor)
            yield from page["jobs"]
            if not page.get("has_more") or not page.get("next_cursor"):
                return
            cursor = page["next_cursor"]

    def cancel(self, job_id: str) -> Dict[str, Any]:
        """DELETE /jobs/{id}: cancels a queued or running job (refunded), or deletes a finished job's result."""
        return self._http.request("DELETE", f"{NS}/jobs/{urllib.parse.quote(job_id)}").json()

    def wait(self, job_id: str, interval: float = 2.0, timeout: Optional[float] = None,
             on_progress: Optional[Callable[[Dict[str, Any]], None]] = None) -> Dict[str, Any]:
        """Polls until the job succeeded, failed or was canceled; returns it (a failed job is returned, not raised)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            job = self.get(job_id)
            if on_progress is not None:
                on_progress(job)
            if job["status"] in _FINAL:
                return job
            if deadline is not None and time.monotonic() + interval > deadline:
                raise NsmError("wait_timeout", f"job {job_id} still {job['status']} after {timeout} s")
            time.sleep(interval)

    def download(self, job_id: str, to: Optional[str] = None, *, max_resumes: int = 5,
                 on_progress: Optional[Callable[[int, Optional[int]], None]] = None) -> DownloadResult:
        """GET /jobs/{id}/result, into the file ``to`` (or returned as ``data``), resuming with ``Range`` (and
        ``If-Range`` on the result's ETag) after a broken connection."""
        path = f"{NS}/jobs/{urllib.parse.quote(job_id)}/result"
        out = open(to, "wb") if to is not None else None
        chunks: List[bytes] = []
        received = 0
        total: Optional[int] = None
        etag: Optional[str] = None
        filename: Optional[str] = None
        content_type: Optional[str] = None
        resumes = 0
        try:
            while True:
                headers: Dict[str, str] = {}
                if received:
                    headers["Range"] = f"bytes={received}-"
                    if etag:
                        headers["If-Range"] = etag
                res = self._http.request("GET", path, headers=headers)
                if received and res.status == 200:
                    # The whole file came back (the result changed, or Range was ignored): start again.
                    received = 0
                    chunks.clear()
                    if out is not None:
                        out.seek(0)
                        out.truncate()
                if res.status == 200:
                    length = res.headers.get("Content-Length")
                    total = int(length) if length is not None else None
                else:
                    m = re.search(r"/(\d+)\s*$", res.headers.get("Content-Range") or "")
                    if m:
                        total = int(m.group(1))
                etag = res.headers.get("ETag") or etag
                filename = disposition_name(res.headers.get("Content-Disposition")) or filename
                content_type = res.headers.get("Content-Type") or content_type
                broken: Optional[BaseException] = None
                try:
                    while True:
                        block = res.raw.read(1 << 16)
                        if not block:
                            break
                        if out is not None:
                            out.write(block)
                        else:
                            chunks.append(block)
                        received += len(block)
                        if on_progress is not None:
                            on_progress(received, total)
                except (http.client.HTTPException, OSError, socket.timeout) as exc:
                    broken = exc
                finally:
                    res.raw.close()
                if broken is None and (total is None or received >= total):
                    break
                # Cut mid-body (http.client returns a short body without an error when the peer closes early).
                if resumes >= max_resumes:
                    raise ConnectionError("download_interrupted",
                                          f"download of {job_id} broke at {received} of {total} bytes {resumes} times")
                resumes += 1
                time.sleep(min(5.0, 0.25 * 2 ** (resumes - 1)))
        finally:
            if out is not None:
                out.close()
        return DownloadResult(bytes=received, resumes=resumes, filename=filename, content_type=content_type,
                              path=to, data=b"".join(chunks) if to is None else None)


class NsmClient:
    """The client. ``NsmClient(base_url, token)``; ``base_url`` is the server, e.g. http://localhost:8080."""

    def __init__(self, base_url: str, token: Optional[str] = None, *, retry: Optional[RetryPolicy] = None,
                 on_retry: Optional[Callable[[RetryEvent], None]] = None, timeout: float = 660.0) -> None:
        self._http = Transport(base_url, token, retry, on_retry, timeout)
        self.jobs = Jobs(self._http)
        self.streams = Streams(self._http)

    def denoise(self, file: FileInput, *, echo_reference: Optional[FileInput] = None, **options: Any) -> DenoisedAudio:
        """POST /denoise: one file → the cleaned audio (``bytes``, with ``.stats`` from X-NS-Stats, ``.filename``).
        Options: model, attenuation_limit_db, output_format, keep_input_sample_rate, loudness_lufs. ``echo_reference``
        (path, bytes, binary file): what the loudspeaker played, its timeline starting with the file's; its echo is
        removed before denoising (docs/echo.md; the stats then carry echo_delay_ms, echo_erle_db). 1 credit."""
        more = [("echo_reference", prepare_file(echo_reference, "reference"))] if echo_reference is not None else []
        body = multipart({**_fields(options), "response": "audio"}, "file", [prepare_file(file)], more)
        res = self._http.request("POST", f"{NS}/denoise", body=body, charged=True)
        audio = DenoisedAudio(res.body)
        audio.stats = res.json_header("X-NS-Stats") or {}
        audio.filename = disposition_name(res.headers.get("Content-Disposition"))
        audio.content_type = res.headers.get("Content-Type")
        audio.request_id = res.headers.get("X-Request-Id")
        return audio

    def denoise_batch(self, files: Sequence[FileInput], *, response: str = "zip", **options: Any) -> Any:
        """POST /denoise/batch: up to 25 files → denoised.zip (``bytes`` with ``.summary``), or with
        ``response="json"`` the manifest (a dict with audio_base64 per item). 1 credit per call."""
        prepared = [prepare_file(f, f"audio-{i + 1}") for i, f in enumerate(files)]
        body = multipart({**_fields(options), "response": response}, "files", prepared)
        res = self._http.request("POST", f"{NS}/denoise/batch", body=body, charged=True)
        if response == "json":
            return res.json()
        z = BatchZip(res.body)
        z.summary = res.json_header("X-NS-Batch") or {}
        z.request_id = res.headers.get("X-Request-Id")
        return z

    def models(self) -> Dict[str, Any]:
        """GET /models: ``{models: [...], default}``."""
        return self._http.request("GET", f"{NS}/models").json()

    def sample(self) -> bytes:
        """GET /sample: a short noisy 16 kHz speech clip (WAV)."""
        return self._http.request("GET", f"{NS}/sample").body

    def health(self) -> Dict[str, Any]:
        """GET /health: status, version, installed models, workers."""
        return self._http.request("GET", f"{NS}/health").json()
