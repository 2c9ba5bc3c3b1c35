"""The asyncio client: `imagent.aio.connect()`, with the blocking client's shape.

    async with imagent.aio.connect() as client:
        session = await client.open("echo")
        await session.send(b"hello")
        async for message in session:
            ...
            message.ack()

The event loop reads the socket as bytes come. Reading pauses while the client
holds more than `max_queued` received messages that the program has not taken
and no call waits (for a reply, a message or an event), so a program that does
not receive leaves the messages with the daemon instead of in its memory.
Not thread-safe: use a client from its event loop only.
"""

from __future__ import annotations

import asyncio
import os
import socket as socket_module
from collections.abc import Generator
from types import TracebackType
from typing import Any

from . import protocol as p
from .core import (
    DEFAULT_TIMEOUT, FAILING_CONNECTION_READ_LIMIT, ClientBase, Event, Message, Pending, Release, SendInFlight,
    SessionBase, SessionState, backoff, checked_session_id, deadline_after, json_result, program_name, remaining,
    retry_allowed, ttl_milliseconds,
)
from .errors import ClientClosed, DaemonUnavailable, TimedOut, VersionUnsupported
from .paths import open_socket, resolve_socket

#: Received messages held (all sessions) before reading pauses while no call waits.
DEFAULT_MAX_QUEUED = 10000
#: How long the reconnecting task waits for WELCOME and the re-attach's OPENEDs.
HANDSHAKE_TIMEOUT = 10.0


class _Protocol(asyncio.Protocol):
    def __init__(self, client: Client, generation: int, sock: socket_module.socket) -> None:
        self.client = client
        self.generation = generation
        self.sock = sock

    def data_received(self, data: bytes) -> None:
        self.client._bytes_received(self.generation, data)

    def connection_lost(self, exc: Exception | None) -> None:
        # A write that failed closes the transport before it read what the daemon
        # said last (an ERROR such as LIMIT_REACHED): the socket is still open here.
        left = FAILING_CONNECTION_READ_LIMIT
        try:
            while left > 0 and (data := self.sock.recv(65536)):
                left -= len(data)
                self.client._bytes_received(self.generation, data)
        except OSError:
            pass
        self.client._lost(self.generation, str(exc) if exc else "imagentd closed the connection")


class Client(ClientBase):
    """A connection to imagentd that survives the daemon's restarts (asyncio).

    Made by `imagent.aio.connect()`; `async with` closes it. Methods are coroutines
    except `events()`. Sends on one session are made one at a time."""

    def __init__(self, path: str, name: str | None, timeout: float | None, max_queued: int) -> None:
        super().__init__(path, name, timeout)
        self.max_queued = max_queued
        self._loop = asyncio.get_running_loop()
        self._core.ack_callback = self._ack
        self._transport: asyncio.Transport | None = None
        #: The handshake on `_transport` is over: calls may use it.
        self._ready = False
        #: Reading is paused: the program holds more than `max_queued` messages.
        self._paused = False
        #: The one task that reconnects, for every call that needs the daemon.
        self._connecting: asyncio.Task[None] | None = None
        #: Per session: done when a message, an error or a lost connection comes.
        self._waiters: dict[int, asyncio.Future[None]] = {}
        self._event_waiter: asyncio.Future[None] | None = None

    # MARK: Public API

    async def open(self, service: str, *, priority: int | None = None, durable: bool | None = None,
                   timeout: float | None = None) -> Session:
        """Create a new session to `service` and attach it (see the blocking `Client.open`)."""
        reply = await self._call(p.OPEN, p.open_records(service, priority, durable), timeout)
        return Session(self, self._core.opened_session(reply))

    async def attach(self, session_id: int, *, timeout: float | None = None) -> Session:
        """Attach an existing session: its unacknowledged messages come again."""
        reply = await self._call(p.OPEN, p.session_record(checked_session_id(session_id)), timeout)
        return Session(self, self._core.opened_session(reply))

    async def send_to(self, session_id: int, payload: bytes, ttl: float | None = None, *,
                      timeout: float | None = None) -> int:
        """SEND on a session not attached here (see the blocking `Client.send_to`)."""
        self._core.check_payload(payload)
        deadline = self._call_deadline(timeout)
        await self._connection(deadline)
        pending = self._core.send_request(checked_session_id(session_id), bytes(payload), ttl_milliseconds(ttl))
        await self._await_reply(pending, deadline)
        return self._core.sent_to(pending)

    async def close_session(self, session_id: int, *, timeout: float | None = None) -> None:
        """CLOSE a session by id, attached here or not."""
        await self._release(self._core.session_for(session_id), p.CLOSE, timeout)

    async def status(self, *, timeout: float | None = None) -> dict[str, Any]:
        """STATUS as a dict."""
        return json_result(await self._call(p.STATUS, b"", timeout))

    async def sessions(self, *, timeout: float | None = None) -> dict[str, Any]:
        """SESSIONS as a dict."""
        return json_result(await self._call(p.SESSIONS, b"", timeout))

    async def metrics(self, *, timeout: float | None = None) -> dict[str, Any]:
        """METRICS as a dict."""
        return json_result(await self._call(p.METRICS, b"", timeout))

    async def ping(self, *, timeout: float | None = None) -> float:
        """The round trip to the daemon, in seconds."""
        start = self._loop.time()
        await self._call(p.PING, b"", timeout)
        return self._loop.time() - start

    async def watch(self, *, timeout: float | None = None) -> None:
        """WATCH: from now on a WatchEvent for every link, session and heartbeat change."""
        await self._call(p.WATCH, b"", timeout)
        self._core.watching = True

    def events(self) -> list[Event]:
        """The events received and not yet taken, oldest first (at most 1024 kept)."""
        return self._core.take_events()

    async def next_event(self, timeout: float | None = None) -> Event | None:
        """The next event, or None when `timeout` seconds pass first."""
        deadline = deadline_after(timeout)
        while not self._core.events:
            await self._connection(deadline)
            if self._paused:
                self._resume()
            if self._event_waiter is None or self._event_waiter.done():
                self._event_waiter = self._loop.create_future()
            if not await _wait(self._event_waiter, deadline):
                return None
        return self._core.events.popleft()

    async def close(self) -> None:
        """Close the connection; the sessions live on in the daemon (detached)."""
        self._core.closed = True
        if self._connecting is not None:
            self._connecting.cancel()
        self._drop("the client was closed")

    async def __aenter__(self) -> Client:
        return self

    async def __aexit__(self, kind: type[BaseException] | None, value: BaseException | None,
                        traceback: TracebackType | None) -> None:
        await self.close()

    # MARK: Sessions

    async def _send(self, state: SessionState, payload: bytes, ttl: float | None, deadline: float | None) -> int:
        """Session.send, under the session's send lock."""
        self._core.check_payload(payload)
        await self._attached(state, deadline)
        sending = SendInFlight(state, payload, ttl_milliseconds(ttl))
        while True:
            pending = sending.request(self._core)
            try:
                reply = await self._exchange(pending, deadline)
            except (TimedOut, asyncio.CancelledError):
                # Its fate is unknown: the next attach's SENT_SEQ settles it before the next send.
                self._drop("a SEND was given up before its ACCEPTED")
                raise
            if reply is not None:
                return reply.integer(p.SEQ)
            await self._attached(state, deadline)
            seq = sending.stored_seq()
            if seq is not None:
                return seq
            retry_allowed(self.path, deadline)

    async def _receive(self, state: SessionState, timeout: float | None) -> Message | None:
        deadline = deadline_after(timeout)
        while True:
            message = self._core.take_message(state)
            if message is not None:
                if self._paused and self._core.queued <= self.max_queued // 2:
                    self._resume()
                return message
            await self._attached(state, deadline)
            if state.queue:
                continue
            if self._paused:
                self._resume()
            waiter = self._waiters.get(state.id)
            if waiter is None or waiter.done():
                waiter = self._waiters[state.id] = self._loop.create_future()
            if not await _wait(waiter, deadline) and not state.queue:
                return None

    async def _release(self, state: SessionState, op: int, timeout: float | None) -> None:
        """CLOSE or DETACH; the session is forgotten here whatever the daemon says."""
        deadline = self._call_deadline(timeout)
        release = Release(state.id, op)
        try:
            while True:
                await self._connection(deadline)
                pending = release.request(self._core)
                await self._await_reply(pending, deadline)
                if release.finished(self._core, pending):
                    return
                retry_allowed(self.path, deadline)
        finally:
            self._core.forget_session(state.id)
            self._wake_sessions()

    def _ack(self, session: int, seq: int) -> None:
        """Message.ack(): never waits for a reply."""
        frame = self._core.ack_frame(session, seq)  # None unless attached on this connection
        if frame is not None and self._transport is not None:
            self._transport.write(frame)

    # MARK: Requests

    async def _call(self, op: int, records: bytes, timeout: float | None) -> p.Frame:
        deadline = self._call_deadline(timeout)
        while True:
            await self._connection(deadline)
            reply = await self._exchange(self._core.request(op, records), deadline)
            if reply is not None:
                return reply
            retry_allowed(self.path, deadline)

    async def _exchange(self, pending: Pending, deadline: float | None) -> p.Frame | None:
        """The reply, or None when the connection was lost; raises its ERROR, or TimedOut."""
        await self._await_reply(pending, deadline)
        return self._core.outcome(pending)

    async def _await_reply(self, pending: Pending, deadline: float | None) -> None:
        """Writes the request and waits until it is done, its connection is gone or
        `deadline` passes; the core says what it came to."""
        transport = self._transport
        if transport is None or pending.generation != self._core.generation:
            return  # its connection is gone: the core calls it lost
        done = self._reply_future(pending)
        transport.write(pending.frame)
        if self._paused:
            self._resume()  # the reply may be behind the messages held back
        try:
            await _wait(done, deadline)
        except asyncio.CancelledError:
            self._core.forget(pending)  # a reply that comes after is ignored
            raise

    # MARK: The connection

    async def _attached(self, state: SessionState, deadline: float | None) -> None:
        while True:
            if state.error is not None:
                raise state.error
            await self._connection(deadline)
            if not self._core.needs_attach(state):
                return
            pending = self._core.attach_request(state)
            await self._await_reply(pending, deadline)
            self._core.attach_answered(state, pending)
            if self._core.needs_attach(state):
                retry_allowed(self.path, deadline)

    async def _connection(self, deadline: float | None, attempts: int | None = None) -> None:
        """Returns once a connection is up (HELLO answered, sessions re-attached); one
        task reconnects, with backoff, for every caller. Raises DaemonUnavailable or
        TimedOut when `deadline` passes first."""
        while not (self._ready and self._transport is not None):
            self._core.check_open()
            if self._connecting is None or self._connecting.done():
                self._connecting = self._loop.create_task(self._reconnect(attempts))
            task = self._connecting
            if not await _wait(task, deadline):
                raise DaemonUnavailable(f"imagentd at {self.path} is not back in time")
            if task.cancelled():
                raise ClientClosed("the client is closed")
            error = task.exception()
            if error is not None:
                raise error

    async def _reconnect(self, attempts: int | None) -> None:
        attempt = 0
        failure = "not connected"
        while not self._core.closed:
            if attempts is not None and attempt >= attempts:
                raise self._core.unreachable(self.path, failure)
            delay = backoff(attempt)
            attempt += 1
            if delay:
                await asyncio.sleep(delay)
            try:
                failure = await self._establish()
            except OSError as error:
                failure = error.strerror or str(error)
            if not failure:
                return
        raise ClientClosed("the client is closed")

    async def _establish(self) -> str:
        """One attempt: connect, HELLO, re-attach. "" on success, else why not."""
        core = self._core
        core.refusal = None
        sock = open_socket(self.path)
        hello = core.connection_made()
        generation = core.generation
        self._ready = False
        try:
            transport, _ = await self._loop.create_unix_connection(lambda: _Protocol(self, generation, sock), sock=sock)
        except OSError as error:
            sock.close()
            core.connection_lost(str(error))
            raise
        if generation != core.generation or transport.is_closing():
            transport.close()
            self._lost(generation, "the connection closed at once")  # its HELLO is lost
            return "the connection closed at once"
        self._transport = transport
        self._paused = False
        handshake = deadline_after(HANDSHAKE_TIMEOUT)
        await self._await_reply(hello, handshake)
        try:
            failure = core.hello_answered(hello)
        except VersionUnsupported:
            self._drop("VERSION_UNSUPPORTED")
            raise
        except TimedOut as error:
            self._drop(str(error))
            return str(error)
        if failure:
            self._drop(failure)
            return failure
        reattach = core.reattach_requests()
        if reattach:
            replies = [self._reply_future(pending) for _, pending in reattach]
            transport.write(b"".join(pending.frame for _, pending in reattach))
            await asyncio.wait(replies, timeout=remaining(handshake))  # a lost connection ends them all
            failure = core.reattached(reattach)
            if failure:
                return failure
            if not all(reply.done() for reply in replies):
                for _, pending in reattach:
                    core.forget(pending)
                self._drop("no answer to the re-attach")
                return "no answer to the re-attach"
        if generation != core.generation or self._transport is None:
            return "the connection closed during the re-attach"
        outgoing = core.take_outgoing()
        if outgoing:
            self._transport.write(outgoing)
        self._ready = True
        core.connection_ready()
        self._wake_sessions()
        return ""

    def _reply_future(self, pending: Pending) -> asyncio.Future[None]:
        """A future done when `pending` is (replied, refused or lost)."""
        done: asyncio.Future[None] = self._loop.create_future()
        pending.waker = lambda: None if done.done() else done.set_result(None)
        return done

    # MARK: Protocol callbacks

    def _bytes_received(self, generation: int, data: bytes) -> None:
        core = self._core
        if generation != core.generation or not core.connected:
            return  # the rest of a connection already dropped
        try:
            core.feed(data)
        except ValueError as error:  # ProtocolError, bad UTF-8 or JSON
            self._drop(f"bad frame from imagentd: {error}")
            return
        transport = self._transport
        if transport is None:
            return
        if self._ready:  # during the re-attach, _establish writes them after the last OPENED
            outgoing = core.take_outgoing()
            if outgoing:
                transport.write(outgoing)
        self._wake_sessions()
        if core.events and self._event_waiter is not None and not self._event_waiter.done():
            self._event_waiter.set_result(None)
        # Nobody waits for anything and the program has enough to take: let the
        # daemon hold the rest (it keeps them, and pauses the session upstream).
        if (core.queued > self.max_queued and not core.pending and not self._waiters and not self._paused
                and (self._event_waiter is None or self._event_waiter.done())):
            self._paused = True
            transport.pause_reading()

    def _lost(self, generation: int, reason: str) -> None:
        """Connection `generation` failed: dropped, unless a newer one replaced it."""
        if generation == self._core.generation:
            self._drop(reason)

    def _drop(self, reason: str) -> None:
        transport = self._transport
        self._transport = None
        self._ready = False
        if transport is not None:
            transport.abort()
        self._core.connection_lost(reason)
        self._wake_sessions(everyone=True)
        if self._event_waiter is not None and not self._event_waiter.done():
            self._event_waiter.set_result(None)

    def _resume(self) -> None:
        self._paused = False
        if self._transport is not None:
            self._transport.resume_reading()

    def _wake_sessions(self, everyone: bool = False) -> None:
        if not self._waiters:
            return
        sessions = self._core.sessions
        for session, waiter in list(self._waiters.items()):
            state = sessions.get(session)
            if everyone or state is None or state.queue or state.error is not None:
                del self._waiters[session]
                if not waiter.done():
                    waiter.set_result(None)


class Session(SessionBase):
    """A session attached through an asyncio `Client`; `async for` receives its messages."""

    def __init__(self, client: Client, state: SessionState) -> None:
        super().__init__(state)
        self._client = client
        self._send_lock = asyncio.Lock()

    async def send(self, payload: bytes, ttl: float | None = None, *, timeout: float | None = None) -> int:
        """Queue one message; its seq once ACCEPTED. Survives a lost connection as the
        blocking `Session.send` does (the client being the session's only sender)."""
        deadline = self._client._call_deadline(timeout)
        if not self._send_lock.locked():
            await self._send_lock.acquire()
        else:
            try:
                await asyncio.wait_for(self._send_lock.acquire(), remaining(deadline))
            except TimeoutError:
                raise TimedOut("another send on this session did not finish in time") from None
        try:
            return await self._client._send(self._state, bytes(payload), ttl, deadline)
        finally:
            self._send_lock.release()

    async def receive(self, timeout: float | None = None) -> Message | None:
        """The next message, or None when `timeout` seconds pass first (None: no limit)."""
        return await self._client._receive(self._state, timeout)

    async def close(self, *, timeout: float | None = None) -> None:
        """CLOSE: end the session for good."""
        await self._client._release(self._state, p.CLOSE, timeout)

    async def detach(self, *, timeout: float | None = None) -> None:
        """DETACH: let go of the session; it lives on."""
        await self._client._release(self._state, p.DETACH, timeout)

    def __aiter__(self) -> Session:
        return self

    async def __anext__(self) -> Message:
        while True:
            message = await self.receive()
            if message is not None:
                return message


class _Connect:
    """`await imagent.aio.connect()` or `async with imagent.aio.connect() as client`."""

    def __init__(self, socket: str | os.PathLike[str] | None, name: str | None, timeout: float | None,
                 max_queued: int) -> None:
        self._arguments = (socket, name, timeout, max_queued)
        self._client: Client | None = None

    async def _connect(self) -> Client:
        socket, name, timeout, max_queued = self._arguments
        client = Client(resolve_socket(socket), name if name is not None else program_name(), timeout, max_queued)
        await client._connection(deadline_after(timeout), attempts=1)
        return client

    def __await__(self) -> Generator[Any, None, Client]:
        return self._connect().__await__()

    async def __aenter__(self) -> Client:
        self._client = await self._connect()
        return self._client

    async def __aexit__(self, kind: type[BaseException] | None, value: BaseException | None,
                        traceback: TracebackType | None) -> None:
        if self._client is not None:
            await self._client.close()


def connect(socket: str | os.PathLike[str] | None = None, name: str | None = None, *,
            timeout: float | None = DEFAULT_TIMEOUT, max_queued: int = DEFAULT_MAX_QUEUED) -> _Connect:
    """Connect to imagentd (as `imagent.connect`); await it, or use it with `async with`."""
    return _Connect(socket, name, timeout, max_queued)


async def _wait(future: asyncio.Future[Any], deadline: float | None) -> bool:
    """Waits for `future` until `deadline` without cancelling it; True when it is done."""
    if future.done():
        return True
    if deadline is None:
        await asyncio.wait((future,))
        return True
    left = remaining(deadline)
    done, _ = await asyncio.wait((future,), timeout=left)
    return bool(done)
