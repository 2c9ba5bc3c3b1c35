"""imagent: the client of imagentd, the imagent connection agent (Agent IPC/1).

Blocking::

    import imagent
    with imagent.connect() as client:
        session = client.open("echo")
        seq = session.send(b"hello")
        message = session.receive(timeout=5)
        if message is not None:
            print(message.payload)
            message.ack()

asyncio: `imagent.aio.connect()`, with the same shape. See the README for the
errors and what the client does when the daemon goes away.
"""

from .client import Client, Session, connect
from .core import (
    AckedEvent, ConnectionEvent, ErrorEvent, Event, ExpiredEvent, LinkStateEvent, Message, SessionStateEvent,
    WatchEvent,
)
from .errors import (
    BadRequest, ClientClosed, DaemonUnavailable, Error, Expired, Internal, IPCError, LimitReached,
    PayloadTooLarge, PermissionDenied, QueueFull, SessionBusy, SessionClosed, ShuttingDown, TimedOut,
    UnknownSession, UpstreamRejected, VersionUnsupported, error_name,
)
from .paths import resolve_socket

__version__ = "0.1.0"

__all__ = [
    "connect", "Client", "Session", "Message", "resolve_socket", "error_name",
    "Event", "AckedEvent", "ConnectionEvent", "ErrorEvent", "ExpiredEvent", "LinkStateEvent",
    "SessionStateEvent", "WatchEvent",
    "Error", "IPCError", "DaemonUnavailable", "TimedOut", "ClientClosed",
    "BadRequest", "VersionUnsupported", "UnknownSession", "PermissionDenied", "SessionBusy", "QueueFull",
    "PayloadTooLarge", "ShuttingDown", "Internal", "UpstreamRejected", "SessionClosed", "LimitReached", "Expired",
]
