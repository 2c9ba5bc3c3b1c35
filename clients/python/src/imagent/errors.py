"""The exceptions of the imagent package, all under `Error`.

The daemon's ERROR codes (imagent-ipc(7), ERROR CODES) each have a class under
`IPCError`; a code this package does not know is treated like INTERNAL, as the
page asks, and raised as a plain `IPCError` carrying that code.
"""

from __future__ import annotations

from typing import ClassVar


class Error(Exception):
    """Every error this package raises."""


class IPCError(Error):
    """The daemon refused a request with ERROR: `code` and the daemon's `message`."""

    code: int = 9
    name: ClassVar[str] = "INTERNAL"

    def __init__(self, message: str = "", code: int | None = None) -> None:
        if code is not None:
            self.code = code
        self.message = message
        label = self.name if code is None or code in ERRORS else f"error {code}"
        super().__init__(f"{label}: {message}" if message else label)


class BadRequest(IPCError):
    code, name = 1, "BAD_REQUEST"


class VersionUnsupported(IPCError):
    code, name = 2, "VERSION_UNSUPPORTED"


class UnknownSession(IPCError):
    code, name = 3, "UNKNOWN_SESSION"


class PermissionDenied(IPCError):
    code, name = 4, "PERMISSION_DENIED"


class SessionBusy(IPCError):
    code, name = 5, "SESSION_BUSY"


class QueueFull(IPCError):
    code, name = 6, "QUEUE_FULL"


class PayloadTooLarge(IPCError):
    code, name = 7, "PAYLOAD_TOO_LARGE"


class ShuttingDown(IPCError):
    code, name = 8, "SHUTTING_DOWN"


class Internal(IPCError):
    code, name = 9, "INTERNAL"


class UpstreamRejected(IPCError):
    code, name = 10, "UPSTREAM_REJECTED"


class SessionClosed(IPCError):
    code, name = 11, "SESSION_CLOSED"


class LimitReached(IPCError):
    code, name = 12, "LIMIT_REACHED"


class Expired(IPCError):
    code, name = 13, "EXPIRED"


ERRORS: dict[int, type[IPCError]] = {
    cls.code: cls
    for cls in (BadRequest, VersionUnsupported, UnknownSession, PermissionDenied, SessionBusy, QueueFull,
                PayloadTooLarge, ShuttingDown, Internal, UpstreamRejected, SessionClosed, LimitReached, Expired)
}


def ipc_error(code: int, message: str = "") -> IPCError:
    """The exception for an ERROR frame's CODE and MESSAGE."""
    cls = ERRORS.get(code)
    return cls(message) if cls is not None else IPCError(message, code)


class DaemonUnavailable(Error):
    """No daemon answers on the socket (not running, no permission, or gone and not back in time)."""

    name: ClassVar[str] = "DAEMON_UNAVAILABLE"


class TimedOut(Error, TimeoutError):
    """A call's timeout passed before the daemon answered."""

    name: ClassVar[str] = "TIMED_OUT"


class ClientClosed(Error):
    """The client was closed (by `close()` or leaving its `with` block)."""

    name: ClassVar[str] = "CLIENT_CLOSED"


def error_name(error: BaseException) -> str:
    """The name imagent-ipc(7) gives an error (QUEUE_FULL, ...), or the library's own."""
    if isinstance(error, IPCError):
        return ERRORS[error.code].name if error.code in ERRORS else f"ERROR_{error.code}"
    name = getattr(error, "name", None)
    return name if isinstance(name, str) else type(error).__name__
