"""Where the daemon's socket is, and connecting to it (imagent-ipc(7), THE SOCKET)."""

from __future__ import annotations

import os
import socket

SYSTEM_SOCKET = "/run/imagent/imagent.sock"


def resolve_socket(explicit: str | os.PathLike[str] | None = None) -> str:
    """The socket to use: `explicit`, then $IMAGENT_SOCKET (when not empty),
    /run/imagent/imagent.sock if it exists, $XDG_RUNTIME_DIR/imagent/imagent.sock
    if it exists, else the system path (whose absence the error will name)."""
    if explicit:
        return os.fspath(explicit)
    from_environment = os.environ.get("IMAGENT_SOCKET")
    if from_environment:
        return from_environment
    if os.path.exists(SYSTEM_SOCKET):
        return SYSTEM_SOCKET
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    if runtime:
        user = os.path.join(runtime, "imagent", "imagent.sock")
        if os.path.exists(user):
            return user
    return SYSTEM_SOCKET


def candidates(path: str) -> tuple[str, str]:
    """The paths to try in order: PATH.admin (root, the daemon's user and its admins
    connect there, out of reach of other users' floods), then PATH."""
    return (path + ".admin", path)


def open_socket(path: str) -> socket.socket:
    """A connected, non-blocking socket: PATH.admin if this user may use it, else PATH.
    Raises OSError (from PATH) when neither accepts."""
    admin, plain = candidates(path)
    for candidate in (admin, plain):
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.setblocking(False)
        try:
            sock.connect(candidate)
            return sock
        except OSError:
            # No permission, no such file, refused, or its listen queue full (EAGAIN).
            sock.close()
            if candidate == plain:
                raise
    raise AssertionError("unreachable")
