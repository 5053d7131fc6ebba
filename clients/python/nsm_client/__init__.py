"""nsm_client: the Python client of the Noise Suppression Gateway API 1.0.0.

    from nsm_client import NsmClient
    client = NsmClient("http://localhost:8080", "mw_live_...")
    audio = client.denoise("talk.wav", model="nsm-2")    # bytes, with audio.stats

HTTP uses the standard library only; live streams need the optional ``websockets`` package.
"""
from ._transport import RetryEvent, RetryPolicy
from .client import BatchZip, DenoisedAudio, DownloadResult, Jobs, NsmClient, disposition_name
from .errors import (
    AuthenticationError,
    ConflictError,
    ConnectionError,
    GoneError,
    InvalidRequestError,
    NotFoundError,
    NsmError,
    PayloadTooLargeError,
    PermissionDeniedError,
    QuotaExhaustedError,
    RateLimitError,
    RequestTimeoutError,
    ServerError,
    StreamError,
)
from .streams import LiveStream, Streams

__version__ = "1.0.0"

__all__ = [
    "NsmClient", "Jobs", "Streams", "LiveStream", "DenoisedAudio", "BatchZip", "DownloadResult", "RetryPolicy",
    "RetryEvent", "disposition_name", "NsmError", "InvalidRequestError", "AuthenticationError", "QuotaExhaustedError",
    "PermissionDeniedError", "NotFoundError", "RequestTimeoutError", "ConflictError", "GoneError",
    "PayloadTooLargeError", "RateLimitError", "ServerError", "ConnectionError", "StreamError", "__version__",
]
