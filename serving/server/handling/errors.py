"""The one error type the server answers with, carrying TF Serving's status code.

Every refusal (bad input, unknown model, full queue) is a `ServingError`; the gRPC layer turns
it into that status code and the REST layer into `{"error": message}` with the HTTP code TF
Serving's `ToHTTPStatusCode` (model_servers/http_server.cc) maps it to.
"""

from __future__ import annotations

# gRPC status code name -> HTTP status, as tensorflow_serving/model_servers/http_server.cc maps them.
HTTP_STATUS = {
    "OK": 200,
    "CANCELLED": 499,
    "UNKNOWN": 500,
    "INVALID_ARGUMENT": 400,
    "DEADLINE_EXCEEDED": 504,
    "NOT_FOUND": 404,
    "ALREADY_EXISTS": 409,
    "PERMISSION_DENIED": 403,
    "RESOURCE_EXHAUSTED": 429,
    "FAILED_PRECONDITION": 400,
    "ABORTED": 409,
    "OUT_OF_RANGE": 400,
    "UNIMPLEMENTED": 501,
    "INTERNAL": 500,
    "UNAVAILABLE": 503,
    "DATA_LOSS": 500,
    "UNAUTHENTICATED": 401,
}


class ServingError(Exception):
    """A request refused with a TF Serving status code (`code` is the grpc.StatusCode name)."""

    def __init__(self, code: str, message: str) -> None:
        if code not in HTTP_STATUS:
            raise ValueError(f"unknown status code name {code!r}")
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message

    @property
    def http_status(self) -> int:
        return HTTP_STATUS[self.code]
