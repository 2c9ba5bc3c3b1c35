"""The blocking client: `imagent.connect()`.

No background thread: a call that waits for the daemon reads the socket itself,
and hands what it reads to the other waiting threads (one reads at a time, under
the client's one lock). So nothing is read while no call waits, and the kernel's
socket buffer and the daemon's flow control hold what the program has not asked
for yet.
"""

from __future__ import annotations

import os
import select
import socket as socket_module
import threading
import time
from collections.abc import Callable, Iterator
from types import TracebackType
from typing import Any

from . import protocol as p
from .core import (
    DEFAULT_TIMEOUT, FAILING_CONNECTION_READ_LIMIT, ClientBase, Event, Message, Pending, Release, SendInFlight,
    SessionBase, SessionState, backoff, checked_session_id, deadline_after, json_result, passed, program_name,
    remaining, retry_allowed, ttl_milliseconds,
)
from .errors import ClientClosed, DaemonUnavailable, TimedOut, VersionUnsupported
from .paths import open_socket, resolve_socket

#: The least time given to connect, HELLO and re-attach, whatever the call's timeout.
HANDSHAKE_GRACE = 0.5
_READ_SIZE = 256 * 1024


class Client(ClientBase):
    """A connection to imagentd that survives the daemon's restarts.

    Made by `imagent.connect()`; a context manager (leaving the block closes it).
    Every method may be called from any thread: the client has one lock, and one
    waiting thread at a time reads the socket for all of them. Sends on one
    session are made one at a time (a second waits for the first's ACCEPTED).
    """

    def __init__(self, path: str, name: str | None, timeout: float | None) -> None:
        super().__init__(path, name, timeout)
        self._core.ack_callback = self._ack
        # `with self._lock` holds the condition's lock (a C-level context manager);
        # notify_all only when a thread sleeps on the condition.
        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)
        self._sleepers = 0
        self._sock: socket_module.socket | None = None
        self._poll: Any = None
        #: A thread is connecting (outside the lock at times): the others wait for it.
        self._connecting = False
        #: A thread is reading the socket (outside the lock): the others sleep.
        self._reading = False
        self._buffer = bytearray(_READ_SIZE)
        self._view = memoryview(self._buffer)

    # MARK: Public API

    def open(self, service: str, *, priority: int | None = None, durable: bool | None = None,
             timeout: float | None = None) -> Session:
        """Create a new session to `service` and attach it. If the connection is lost
        before OPENED, OPEN is made again on the next connection (the first may have
        created a session that is then left unused)."""
        reply = self._call(p.OPEN, p.open_records(service, priority, durable), timeout)
        return Session(self, self._core.opened_session(reply))

    def attach(self, session_id: int, *, timeout: float | None = None) -> Session:
        """Attach an existing session (OPEN with SESSION): its unacknowledged messages come again."""
        reply = self._call(p.OPEN, p.session_record(checked_session_id(session_id)), timeout)
        return Session(self, self._core.opened_session(reply))

    def send_to(self, session_id: int, payload: bytes, ttl: float | None = None, *,
                timeout: float | None = None) -> int:
        """SEND on a session of this user that this client has not attached (one attached
        to no connection: `imagent send` does this); returns the seq once ACCEPTED.
        Without an attach there is no SENT_SEQ to resolve a lost reply: when the
        connection goes before ACCEPTED, this raises DaemonUnavailable and the message
        may or may not have been stored."""
        self._core.check_payload(payload)
        deadline = self._call_deadline(timeout)
        with self._lock:
            self._connection(deadline)
            pending = self._core.send_request(checked_session_id(session_id), bytes(payload), ttl_milliseconds(ttl))
            self._await_reply(pending, deadline)
            return self._core.sent_to(pending)

    def close_session(self, session_id: int, *, timeout: float | None = None) -> None:
        """CLOSE a session by id, attached here or not: it ends for good."""
        self._release(self._core.session_for(session_id), p.CLOSE, timeout)

    def status(self, *, timeout: float | None = None) -> dict[str, Any]:
        """STATUS: the daemon's and the link's state (imagent-ipc(7), STATUS AND METRICS)."""
        return json_result(self._call(p.STATUS, b"", timeout))

    def sessions(self, *, timeout: float | None = None) -> dict[str, Any]:
        """SESSIONS: the caller's sessions (every session for an admin)."""
        return json_result(self._call(p.SESSIONS, b"", timeout))

    def metrics(self, *, timeout: float | None = None) -> dict[str, Any]:
        """METRICS: counters, gauges and histograms."""
        return json_result(self._call(p.METRICS, b"", timeout))

    def ping(self, *, timeout: float | None = None) -> float:
        """PING: the round trip to the daemon, in seconds."""
        start = time.monotonic()
        self._call(p.PING, b"", timeout)
        return time.monotonic() - start

    def watch(self, *, timeout: float | None = None) -> None:
        """WATCH: from now on the daemon sends a WatchEvent for every link, session and
        heartbeat change (imagent-ipc(7), WATCH EVENTS); asked again after a reconnect."""
        self._call(p.WATCH, b"", timeout)
        with self._lock:
            self._core.watching = True

    def events(self) -> list[Event]:
        """The events received so far (and not yet taken), oldest first; does not read.

        Events are LinkStateEvent, SessionStateEvent, AckedEvent, ExpiredEvent,
        ErrorEvent, ConnectionEvent and WatchEvent. At most 1024 are kept: when
        nobody takes them, the oldest are dropped."""
        with self._lock:
            return self._core.take_events()

    def next_event(self, timeout: float | None = None) -> Event | None:
        """The next event, reading the socket up to `timeout` seconds (None: no limit);
        None when the timeout passes."""
        deadline = deadline_after(timeout)
        core = self._core
        with self._lock:
            while True:
                if core.events:
                    return core.events.popleft()
                self._connection(deadline)
                generation = core.generation
                if not self._wait(lambda: bool(core.events) or core.generation != generation or not core.connected,
                                  deadline) and passed(deadline):
                    return None if not core.events else core.events.popleft()

    def close(self) -> None:
        """Close the connection; the sessions live on in the daemon (detached)."""
        with self._lock:
            self._core.closed = True
            self._drop("the client was closed")
            self._notify()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None,
                 traceback: TracebackType | None) -> None:
        self.close()

    # MARK: Sessions (called by Session)

    def _send(self, state: SessionState, payload: bytes, ttl: float | None, deadline: float | None) -> int:
        """Session.send, under the session's send lock."""
        core = self._core
        core.check_payload(payload)
        with self._lock:
            self._attached(state, deadline)
            sending = SendInFlight(state, payload, ttl_milliseconds(ttl))
            while True:
                pending = sending.request(core)
                try:
                    reply = self._exchange(pending, deadline)
                except TimedOut:
                    # Its fate is unknown: the next attach's SENT_SEQ settles it before the next send.
                    self._drop("a SEND was given up before its ACCEPTED")
                    raise
                if reply is not None:
                    return reply.integer(p.SEQ)
                self._attached(state, deadline)
                seq = sending.stored_seq()
                if seq is not None:
                    return seq
                retry_allowed(self.path, deadline)

    def _receive(self, state: SessionState, timeout: float | None) -> Message | None:
        core = self._core
        deadline = deadline_after(timeout)
        with self._lock:
            while True:
                message = core.take_message(state)
                if message is not None:
                    return message
                self._attached(state, deadline)
                generation = core.generation
                self._wait(lambda: bool(state.queue) or state.error is not None or core.generation != generation
                           or not core.connected, deadline)
                if not state.queue and passed(deadline):
                    return None

    def _release(self, state: SessionState, op: int, timeout: float | None) -> None:
        """CLOSE or DETACH; the session is forgotten here whatever the daemon says."""
        deadline = self._call_deadline(timeout)
        release = Release(state.id, op)
        with self._lock:
            try:
                while True:
                    self._connection(deadline)
                    pending = release.request(self._core)
                    self._await_reply(pending, deadline)
                    if release.finished(self._core, pending):
                        return
                    retry_allowed(self.path, deadline)
            finally:
                self._core.forget_session(state.id)

    def _ack(self, session: int, seq: int) -> None:
        """Message.ack(): never waits for a reply."""
        with self._lock:
            frame = self._core.ack_frame(session, seq)
            if frame is not None and self._sock is not None:
                try:
                    self._write(frame, deadline_after(self.timeout))
                except (OSError, TimedOut):
                    pass  # sent again after the re-attach

    # MARK: Requests

    def _call(self, op: int, records: bytes, timeout: float | None) -> p.Frame:
        """A request, made again on the next connection when its connection is lost."""
        deadline = self._call_deadline(timeout)
        with self._lock:
            while True:
                self._connection(deadline)
                reply = self._exchange(self._core.request(op, records), deadline)
                if reply is not None:
                    return reply
                retry_allowed(self.path, deadline)

    def _exchange(self, pending: Pending, deadline: float | None) -> p.Frame | None:
        """The reply, or None when the connection was lost; raises its ERROR, or TimedOut."""
        self._await_reply(pending, deadline)
        return self._core.outcome(pending)

    def _await_reply(self, pending: Pending, deadline: float | None) -> None:
        """With the lock held: writes the request, then reads until it is done, its
        connection is gone or `deadline` passes; the core says what it came to."""
        try:
            self._write(pending.frame, deadline)
        except OSError as error:
            self._drain()  # what the daemon said before it closed (an ERROR) is still there
            self._lost(pending.generation, f"write failed: {error}")
        self._wait(lambda: pending.done, deadline)

    # MARK: The connection

    def _connect_first(self, deadline: float | None) -> None:
        with self._lock:
            self._connection(deadline, attempts=1)

    def _attached(self, state: SessionState, deadline: float | None) -> None:
        """With the lock held: the connection is up and `state` attached to it."""
        core = self._core
        while True:
            if state.error is not None:
                raise state.error
            self._connection(deadline)
            if not core.needs_attach(state):
                return
            pending = core.attach_request(state)
            self._await_reply(pending, deadline)
            core.attach_answered(state, pending)
            if core.needs_attach(state):
                retry_allowed(self.path, deadline)

    def _connection(self, deadline: float | None, attempts: int | None = None) -> None:
        """With the lock held: returns once a connection is up (HELLO answered, sessions
        re-attached), connecting with backoff if needed; raises DaemonUnavailable or
        TimedOut when `deadline` passes first."""
        attempt = 0
        last_failure = "not connected"
        while True:
            self._core.check_open()
            if self._sock is not None and not self._connecting:
                return
            if self._connecting:
                if passed(deadline):
                    raise DaemonUnavailable(f"imagentd at {self.path} is not back: reconnecting")
                self._sleep(remaining(deadline))
                continue
            if attempts is not None and attempt >= attempts:
                raise self._core.unreachable(self.path, last_failure)
            delay = backoff(attempt)
            if attempt > 0 and deadline is not None and time.monotonic() + delay > deadline:
                raise DaemonUnavailable(f"cannot connect to imagentd at {self.path}: {last_failure}")
            if delay > 0:
                self._sleep(delay)
                if self._sock is not None or self._connecting:
                    continue
            attempt += 1
            self._connecting = True
            try:
                # A handshake cut short would only have to start again: it gets at least
                # HANDSHAKE_GRACE, also in a call with a shorter (or no time) left.
                grace = time.monotonic() + HANDSHAKE_GRACE
                last_failure = self._establish(None if deadline is None else max(deadline, grace))
            finally:
                self._connecting = False
                self._notify()
            if not last_failure:
                return

    def _establish(self, deadline: float | None) -> str:
        """One attempt (lock held, `_connecting` set): connect, HELLO, re-attach.
        Returns "" on success, else why it failed."""
        core = self._core
        core.refusal = None
        self._lock.release()
        try:
            sock = open_socket(self.path)
        except OSError as error:
            return error.strerror or str(error)
        finally:
            self._lock.acquire()
        if core.closed:
            sock.close()
            raise ClientClosed("the client is closed")
        self._sock = sock
        self._poll = select.poll()
        self._poll.register(sock, select.POLLIN)
        hello = core.connection_made()
        self._await_reply(hello, deadline)
        try:
            failure = core.hello_answered(hello)
        except VersionUnsupported:
            self._drop("VERSION_UNSUPPORTED")
            raise
        except TimedOut:
            self._drop("HELLO timed out")
            raise
        if failure:
            self._drop(failure)
            return failure
        reattach = core.reattach_requests()
        if reattach:
            try:
                self._write(b"".join(pending.frame for _, pending in reattach), deadline)
            except OSError as error:
                self._lost(core.generation, f"write failed: {error}")
            self._wait(lambda: all(pending.done for _, pending in reattach), deadline)
            failure = core.reattached(reattach)
            if failure:
                return failure
            if not all(pending.done for _, pending in reattach):
                for _, pending in reattach:
                    core.forget(pending)
                self._drop("re-attach timed out")
                raise TimedOut("imagentd did not answer the re-attach in time")
        outgoing = core.take_outgoing()
        if outgoing:
            try:
                self._write(outgoing, deadline)
            except OSError as error:
                self._lost(core.generation, f"write failed: {error}")
                return str(error)
        core.connection_ready()
        return ""

    def _wait(self, done: Callable[[], bool], deadline: float | None) -> bool:
        """With the lock held: reads (or lets another thread read) until `done()`, the
        connection is gone, or `deadline`. Returns done()."""
        while not done():
            if self._sock is None:
                return False
            if self._reading:
                if passed(deadline):
                    return False
                self._sleep(remaining(deadline))
            else:
                self._read(deadline)  # at least once, also for a timeout of 0
                if passed(deadline):
                    return done()
        return True

    def _read(self, deadline: float | None) -> None:
        """One read: waits for bytes outside the lock, handles them inside."""
        sock, poller, generation = self._sock, self._poll, self._core.generation
        assert sock is not None
        self._reading = True
        count = -1
        failure = ""
        self._lock.release()
        try:
            # poll(2) first: a reply is seldom there yet, and an EAGAIN costs Python more.
            timeout = remaining(deadline)
            if poller.poll(None if timeout is None else int(timeout * 1000) + 1):
                count = sock.recv_into(self._buffer)
        except BlockingIOError:
            pass
        except OSError as error:
            failure = str(error)
        finally:
            self._lock.acquire()
            self._reading = False
            self._notify()
        if generation != self._core.generation or self._sock is not sock:
            return  # dropped meanwhile (close)
        if failure or count == 0:
            self._lost(generation, failure or "imagentd closed the connection")
            return
        if count > 0:
            try:
                self._core.feed(self._view[:count])
            except ValueError as error:  # ProtocolError, bad UTF-8 or JSON
                self._lost(generation, f"bad frame from imagentd: {error}")
                return
            outgoing = self._core.take_outgoing()
            if outgoing:
                try:
                    self._write(outgoing, deadline)
                except (OSError, TimedOut) as error:
                    self._lost(generation, f"write failed: {error}")

    def _write(self, data: bytes, deadline: float | None) -> None:
        """With the lock held: the whole of `data`, reading meanwhile if the daemon is
        waiting for us to read. Raises OSError when the connection fails."""
        sock = self._sock
        if sock is None:
            raise ConnectionError("not connected")
        view = memoryview(data)
        poller = None
        while view:
            try:
                sent = sock.send(view, socket_module.MSG_NOSIGNAL)
            except BlockingIOError:
                sent = 0
            view = view[sent:]
            if view:
                if passed(deadline):
                    self._drop("a write timed out")
                    raise TimedOut("imagentd did not read in time")
                if poller is None:
                    poller = select.poll()
                    # Read meanwhile unless another thread does: the daemon may be
                    # waiting for room to write before it reads again.
                    poller.register(sock, select.POLLOUT | (0 if self._reading else select.POLLIN))
                timeout = remaining(deadline)
                for _, flags in poller.poll(None if timeout is None else int(timeout * 1000) + 1):
                    if flags & select.POLLIN:
                        self._read_during_write(sock)

    def _read_during_write(self, sock: socket_module.socket) -> None:
        try:
            count = sock.recv_into(self._buffer)
        except BlockingIOError:
            return
        if count == 0:
            raise ConnectionError("imagentd closed the connection")
        try:
            self._core.feed(self._view[:count])
        except ValueError as error:
            raise ConnectionError(f"bad frame from imagentd: {error}") from None

    def _sleep(self, timeout: float | None) -> None:
        self._sleepers += 1
        try:
            self._cond.wait(timeout)
        finally:
            self._sleepers -= 1

    def _notify(self) -> None:
        if self._sleepers:
            self._cond.notify_all()

    def _drain(self) -> None:
        """Reads what is left on a failing connection, without waiting (and not for ever)."""
        sock = self._sock
        left = FAILING_CONNECTION_READ_LIMIT
        try:
            while sock is not None and not self._reading and left > 0:
                count = sock.recv_into(self._buffer)
                if count == 0:
                    return
                left -= count
                self._core.feed(self._view[:count])
        except (OSError, ValueError):
            return

    def _lost(self, generation: int, reason: str) -> None:
        """Connection `generation` failed: dropped, unless a newer one replaced it."""
        if generation == self._core.generation:
            self._drop(reason)

    def _drop(self, reason: str) -> None:
        """Closes the current connection (lock held); its requests are lost."""
        sock = self._sock
        if sock is None:
            return
        self._sock = None
        try:
            sock.shutdown(socket_module.SHUT_RDWR)  # wakes a thread waiting in poll
        except OSError:
            pass
        sock.close()
        self._core.connection_lost(reason)
        self._notify()


class Session(SessionBase):
    """A session attached through a `Client`: `id`, `send`, `receive`, `close`, `detach`.

    Iterating over a session receives its messages one by one, without a timeout.
    """

    def __init__(self, client: Client, state: SessionState) -> None:
        super().__init__(state)
        self._client = client
        self._send_lock = threading.Lock()

    def send(self, payload: bytes, ttl: float | None = None, *, timeout: float | None = None) -> int:
        """Queue one message; returns its seq once the daemon stored it (ACCEPTED).

        `ttl` (seconds): give the message up (an ExpiredEvent) if the server does not
        have it by then. If the connection is lost before ACCEPTED, the client
        reconnects, re-attaches and reads OPENED's SENT_SEQ: the message was stored
        (its seq is returned) or it is sent again; neither lost nor duplicated, as
        long as this client is the session's only sender. `timeout` (default: the
        client's) bounds the whole call, reconnecting included: TimedOut (the message
        may have been stored) or DaemonUnavailable."""
        deadline = self._client._call_deadline(timeout)
        left = remaining(deadline)
        if not self._send_lock.acquire(timeout=-1 if left is None else left):
            raise TimedOut("another send on this session did not finish in time")
        try:
            return self._client._send(self._state, bytes(payload), ttl, deadline)
        finally:
            self._send_lock.release()

    def receive(self, timeout: float | None = None) -> Message | None:
        """The next message, waiting up to `timeout` seconds (None: no limit); None when
        the timeout passes. Messages the daemon delivers again (after a reconnect) are
        dropped when this client already handed them over. Raises the session's error
        once it is closed (SessionClosed) and its queue is empty, and DaemonUnavailable
        when the daemon is gone and not back by the timeout."""
        return self._client._receive(self._state, timeout)

    def close(self, *, timeout: float | None = None) -> None:
        """CLOSE: end the session for good, here and on the server."""
        self._client._release(self._state, p.CLOSE, timeout)

    def detach(self, *, timeout: float | None = None) -> None:
        """DETACH: let go of the session; it lives on (`client.attach(id)` later)."""
        self._client._release(self._state, p.DETACH, timeout)

    def __iter__(self) -> Iterator[Message]:
        while True:
            message = self.receive()
            if message is not None:
                yield message


def connect(socket: str | os.PathLike[str] | None = None, name: str | None = None, *,
            timeout: float | None = DEFAULT_TIMEOUT) -> Client:
    """Connect to imagentd and say HELLO.

    `socket`: the socket's path (default: $IMAGENT_SOCKET, /run/imagent/imagent.sock,
    $XDG_RUNTIME_DIR/imagent/imagent.sock; PATH.admin is tried first). `name`: the
    client's name in the daemon's logs. `timeout`: the default limit (seconds, None:
    none) of each call that waits for the daemon. Raises DaemonUnavailable when no
    daemon answers now."""
    client = Client(resolve_socket(socket), name if name is not None else program_name(), timeout)
    client._connect_first(deadline_after(timeout))
    return client

