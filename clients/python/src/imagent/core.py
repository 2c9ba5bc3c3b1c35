"""What the blocking and the asyncio clients share: the protocol state of one
client, without I/O, threads or an event loop.

The core matches replies to requests, keeps each attached session's resume
state (the last seq ACCEPTED, raised to each OPENED's SENT_SEQ, so that a send
in flight was stored when it passed the value before the send; the highest seq
received; the highest seq the program acknowledged, sent again after a
re-attach), and queues received messages and events. It also decides what a
reply means: `outcome` (the reply, its ERROR raised, lost, or timed out),
`hello_answered`, `attach_answered` and `reattached` (which refusals end a
session), `SendInFlight.stored_seq` (a lost SEND settled by SENT_SEQ),
`Release.finished` (a lost CLOSE) and `retry_allowed` (a lost request made
again while the call's time lasts). The clients move bytes, wait and
reconnect: they write what the core builds, wait until a request is `done`,
the connection is gone or the time is up, and then ask the core what it came
to; after `feed` they write `take_outgoing()` and wake waiters.
"""

from __future__ import annotations

import os
import random
import sys
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from . import protocol as p
from .errors import (
    ClientClosed, DaemonUnavailable, Error, IPCError, PayloadTooLarge, PermissionDenied, SessionClosed, TimedOut,
    UnknownSession, VersionUnsupported, ipc_error,
)

#: The default timeout of a call that waits for the daemon (seconds).
DEFAULT_TIMEOUT = 60.0
#: Events kept for `next_event` before the oldest are dropped.
EVENT_QUEUE_LIMIT = 1024

LINK_STATE_NAMES = {0: "disconnected", 1: "connecting", 2: "connected", 3: "disconnecting"}
SESSION_STATE_NAMES = {0: "pending", 1: "open", 2: "paused", 3: "failed", 4: "closed"}
SESSION_CLOSED_STATE = 4

#: Refusals of an attach after which the session cannot be attached again.
FATAL_ATTACH_ERRORS = (SessionClosed, UnknownSession, PermissionDenied)

#: At most this much is read from a connection that failed, for what the daemon
#: said last (an ERROR such as LIMIT_REACHED): a daemon still writing cannot keep
#: a client reading it.
FAILING_CONNECTION_READ_LIMIT = 1024 * 1024

#: Reconnect delays before attempt n (seconds), then `BACKOFF_CAP`; each is
#: scaled by a random factor in [0.5, 1] so that clients of a restarted daemon
#: do not all come back at once.
BACKOFF_TABLE = (0.0, 0.02, 0.05, 0.1, 0.2, 0.4, 0.8)
BACKOFF_CAP = 1.0


def backoff(attempt: int, jitter: float | None = None) -> float:
    """The delay before reconnect attempt `attempt` (0 = the first, at once)."""
    base = BACKOFF_TABLE[attempt] if attempt < len(BACKOFF_TABLE) else BACKOFF_CAP
    factor = random.uniform(0.5, 1.0) if jitter is None else jitter
    return base * factor


class Message:
    """An inbound message of a session: `session`, `seq`, `payload` (bytes).

    `ack()` acknowledges it and every earlier message of its session (ACK is
    cumulative); the daemon delivers unacknowledged messages again after the
    next attach, and the client drops those it already handed over.
    """

    __slots__ = ("session", "seq", "payload", "_ack")

    def __init__(self, session: int, seq: int, payload: bytes, ack: Callable[[int, int], None]) -> None:
        self.session = session
        self.seq = seq
        self.payload = payload
        self._ack = ack

    def ack(self) -> None:
        """Acknowledge this message (and the session's earlier ones). Never blocks on
        a reply; while the daemon is away, the ACK is sent after the re-attach."""
        self._ack(self.session, self.seq)

    def __repr__(self) -> str:
        return f"Message(session={self.session}, seq={self.seq}, payload={len(self.payload)} bytes)"


# MARK: Events


@dataclass(frozen=True, slots=True)
class LinkStateEvent:
    """The daemon's link to the server changed state (0 disconnected .. 3 disconnecting;
    unknown values are kept)."""

    state: int

    @property
    def state_name(self) -> str:
        return LINK_STATE_NAMES.get(self.state, str(self.state))


@dataclass(frozen=True, slots=True)
class SessionStateEvent:
    """A session's state changed (0 pending, 1 open, 2 paused, 3 failed, 4 closed);
    `error` says why when the daemon gave a CODE."""

    session: int
    state: int
    error: IPCError | None

    @property
    def state_name(self) -> str:
        return SESSION_STATE_NAMES.get(self.state, str(self.state))


@dataclass(frozen=True, slots=True)
class AckedEvent:
    """The server holds every outbound message of `session` up to `seq`."""

    session: int
    seq: int


@dataclass(frozen=True, slots=True)
class ExpiredEvent:
    """Outbound message `seq` was given up: `error` is Expired, UpstreamRejected or PayloadTooLarge."""

    session: int
    seq: int
    error: IPCError


@dataclass(frozen=True, slots=True)
class ErrorEvent:
    """An ERROR the daemon sent with request 0 (a refused ACK, a refused connection)."""

    error: IPCError


@dataclass(frozen=True, slots=True)
class ConnectionEvent:
    """The client lost (`connected` False) or regained its connection to the daemon."""

    connected: bool
    reason: str


@dataclass(frozen=True, slots=True)
class WatchEvent:
    """A WATCH subscriber's EVENT: one JSON object."""

    document: dict[str, Any]


Event = LinkStateEvent | SessionStateEvent | AckedEvent | ExpiredEvent | ErrorEvent | ConnectionEvent | WatchEvent


# MARK: State


class Pending:
    """A request awaiting its reply on connection `generation`."""

    __slots__ = ("op", "request", "generation", "frame", "reply", "error", "lost", "waker")

    def __init__(self, op: int, request: int, generation: int, frame: bytes) -> None:
        self.op = op
        self.request = request
        self.generation = generation
        self.frame = frame
        self.reply: p.Frame | None = None
        self.error: IPCError | None = None
        self.lost = False
        #: Called once it is done (the asyncio client completes a future).
        self.waker: Callable[[], None] | None = None

    @property
    def done(self) -> bool:
        return self.reply is not None or self.error is not None or self.lost

    def wake(self) -> None:
        if self.waker is not None:
            self.waker()

    def timed_out(self) -> TimedOut:
        return TimedOut(f"no reply to {p.OP_NAMES.get(self.op, hex(self.op))} from imagentd within the timeout")


class SessionState:
    """What the client remembers of an attached session, across reconnects."""

    __slots__ = ("id", "attached_generation", "last_accepted", "acked_seq", "state",
                 "highest_received", "program_acked", "queue", "error", "released")

    def __init__(self, session: int) -> None:
        self.id = session
        #: The connection this session is attached to; another value: re-attach first.
        self.attached_generation = -1
        #: The highest outbound seq ACCEPTED (OPENED's SENT_SEQ to begin with).
        self.last_accepted = 0
        self.acked_seq = 0
        self.state = 0
        #: The highest inbound seq queued or handed over: MESSAGEs at or below it are redeliveries.
        self.highest_received = 0
        #: The highest inbound seq the program acknowledged (sent again after a re-attach).
        self.program_acked = 0
        self.queue: deque[Message] = deque()
        #: Why the session cannot be used any more (closed, not ours), or None.
        self.error: Error | None = None
        #: Closed or detached by the program: not re-attached.
        self.released = False


class SendInFlight:
    """One `send` of the program on an attached session, made again until the
    daemon has stored it once.

    Sends on a session are made one at a time (each client holds a lock per
    session) and the client is the session's only sender, so nothing else is in
    flight: when the re-attach after a lost connection raises `last_accepted`
    (OPENED's SENT_SEQ) above its value before the send, this send was stored.
    """

    __slots__ = ("session", "payload", "ttl_ms", "accepted_before")

    def __init__(self, session: SessionState, payload: bytes, ttl_ms: int | None) -> None:
        self.session = session
        self.payload = payload
        self.ttl_ms = ttl_ms
        self.accepted_before = session.last_accepted

    def request(self, core: ClientCore) -> Pending:
        return core.send_request(self.session.id, self.payload, self.ttl_ms)

    def stored_seq(self) -> int | None:
        """After the re-attach that followed a lost SEND: its seq when the daemon
        stored it, None when it has to be sent again."""
        last = self.session.last_accepted
        return last if last > self.accepted_before else None


class Release:
    """A CLOSE or DETACH of the program, made again on the next connection when
    its connection is lost before the reply."""

    __slots__ = ("session", "op", "lost_once")

    def __init__(self, session: int, op: int) -> None:
        self.session = session
        self.op = op
        self.lost_once = False

    def request(self, core: ClientCore) -> Pending:
        return core.request(self.op, p.session_record(self.session))

    def finished(self, core: ClientCore, pending: Pending) -> bool:
        """After its exchange: True when done, False to make it again on the next
        connection. Raises the daemon's refusal, or TimedOut."""
        try:
            reply = core.outcome(pending)
        except (SessionClosed, UnknownSession):
            if self.lost_once:
                return True  # the CLOSE lost with its connection did it
            raise
        if reply is not None or self.op == p.DETACH:
            return True  # a connection that goes detaches its sessions
        self.lost_once = True
        return False


class ClientCore:
    """The protocol state of one client connection and its sessions (no I/O)."""

    def __init__(self, name: str | None) -> None:
        self.name = name
        self.generation = 0
        self.connected = False
        self.max_payload = p.DEFAULT_MAX_PAYLOAD
        self.daemon_version = ""
        self.link_state = 0
        self.sessions: dict[int, SessionState] = {}
        self.pending: dict[int, Pending] = {}
        self.events: deque[Event] = deque(maxlen=EVENT_QUEUE_LIMIT)
        self.events_dropped = 0
        self.redeliveries_dropped = 0
        self.queued = 0
        self.decoder = p.FrameDecoder()
        #: The last ERROR with request 0 on this connection (LIMIT_REACHED at accept, ...).
        self.last_unsolicited_error: IPCError | None = None
        #: WATCH was asked for: asked again on each new connection.
        self.watching = False
        #: Closed by the program: every call raises ClientClosed.
        self.closed = False
        #: Why the daemon turned the last connection attempt away (ERROR), if it did.
        self.refusal: IPCError | None = None
        #: A handshake completed once: the next one is a reconnect (a ConnectionEvent).
        self.ever_connected = False
        self._next_request = 1
        self._outgoing: list[bytes] = []
        #: What `Message.ack()` calls: the client's.
        self.ack_callback: Callable[[int, int], None] = _no_ack

    # MARK: Connections

    def connection_made(self) -> Pending:
        """A new connection: returns HELLO, to be written first."""
        self.generation += 1
        self.connected = True
        self.decoder = p.FrameDecoder()
        self.last_unsolicited_error = None
        self._outgoing.clear()
        records = p.u8(p.IPC_VERSION, 1)
        if self.name is not None:  # at most 128 bytes, cut on a character's boundary
            name = self.name.encode("utf-8")[:128].decode("utf-8", errors="ignore")
            records += p.text(p.CLIENT_NAME, name)
        return self.request(p.HELLO, records)

    def hello_answered(self, hello: Pending) -> str:
        """After HELLO's exchange: "" once WELCOME is applied, else why the daemon did
        not welcome us (its ERROR kept in `refusal`; the connection is to be dropped).
        Raises VersionUnsupported (trying again would not help) and TimedOut."""
        try:
            welcome = self.outcome(hello)
        except VersionUnsupported:
            raise
        except IPCError as error:  # LIMIT_REACHED, SHUTTING_DOWN, ...: try again later
            self.refusal = error
            return str(error)
        if welcome is None:
            self.refusal = self.last_unsolicited_error  # LIMIT_REACHED at accept comes with request 0
            reason = f" ({self.last_unsolicited_error})" if self.last_unsolicited_error is not None else ""
            return f"the connection closed during HELLO{reason}"
        self._welcome(welcome)
        return ""

    def _welcome(self, frame: p.Frame) -> None:
        """Applies WELCOME (and asks for WATCH again when the program had asked for it)."""
        self.daemon_version = frame.text(p.DAEMON_VERSION, "")
        announced = frame.optional_integer(p.MAX_PAYLOAD) or p.DEFAULT_MAX_PAYLOAD
        self.max_payload = min(announced, p.MAX_PAYLOAD_CEILING)
        self.link_state = frame.optional_integer(p.LINK_STATE) or 0
        self.decoder.max_payload = self.max_payload
        if self.watching:  # its OK is not waited for
            watch = self.request(p.WATCH)
            self.forget(watch)
            self._outgoing.append(watch.frame)

    def connection_lost(self, reason: str) -> None:
        """The connection of this generation is gone: its requests are lost."""
        if not self.connected:
            return
        self.connected = False
        for request, pending in list(self.pending.items()):
            if pending.generation == self.generation:
                del self.pending[request]
                pending.lost = True
                pending.wake()
        self._outgoing.clear()
        self.add_event(ConnectionEvent(False, reason))

    def needs_attach(self, session: SessionState) -> bool:
        return not session.released and session.error is None and session.attached_generation != self.generation

    def attach_request(self, session: SessionState) -> Pending:
        """OPEN with SESSION: attaches `session` to this connection."""
        return self.request(p.OPEN, p.session_record(session.id))

    def attach_answered(self, session: SessionState, pending: Pending) -> None:
        """After an attach's exchange: returns when attached or when the connection
        was lost; raises the refusal (kept as the session's error when it ends the
        session), or TimedOut."""
        try:
            self.outcome(pending)
        except FATAL_ATTACH_ERRORS as error:
            session.error = error
            raise

    def reattach_requests(self) -> list[tuple[SessionState, Pending]]:
        """After WELCOME: an attach for every session the program still holds."""
        return [(state, self.attach_request(state)) for state in self.sessions.values() if self.needs_attach(state)]

    def reattached(self, reattach: list[tuple[SessionState, Pending]]) -> str:
        """Once every re-attach is done: "" when the connection is still up, else why
        not. A refusal that ends a session becomes its error; others (SESSION_BUSY,
        ...) are tried again by the next call on that session."""
        for state, pending in reattach:
            if pending.lost:
                return "the connection closed during the re-attach"
            if isinstance(pending.error, FATAL_ATTACH_ERRORS):
                state.error = pending.error
        return ""

    def connection_ready(self) -> None:
        """The handshake is over (WELCOME, re-attach, `take_outgoing()` written)."""
        if self.ever_connected:
            self.add_event(ConnectionEvent(True, "reconnected"))
        self.ever_connected = True

    def unreachable(self, path: str, failure: str) -> Error:
        """What a client that gives up connecting raises: the daemon's refusal when
        the last attempt got one, else DaemonUnavailable."""
        if self.refusal is not None:
            return self.refusal  # a daemon answered, and said no
        return DaemonUnavailable(f"cannot connect to imagentd at {path}: {failure}")

    # MARK: Requests

    def request(self, op: int, records: bytes = b"") -> Pending:
        """A request with a fresh id, awaiting its reply on this connection. Raises
        PayloadTooLarge for a frame the daemon would refuse by its length alone (it
        would close the connection, and the request would be made again on the next)."""
        if 6 + len(records) > self.max_payload + p.FRAME_OVERHEAD:
            raise PayloadTooLarge(f"a request of {6 + len(records)} bytes, above the daemon's frame limit")
        request = self._take_request_id()
        return self._register(Pending(op, request, self.generation, p.encode(op, request, records)))

    def send_request(self, session: int, payload: bytes, ttl_ms: int | None) -> Pending:
        request = self._take_request_id()
        frame = p.send_frame(request, session, payload, ttl_ms)
        return self._register(Pending(p.SEND, request, self.generation, frame))

    def outcome(self, pending: Pending) -> p.Frame | None:
        """What a request came to once its caller stopped waiting (it is done, its
        connection is gone, or the time is up): the reply; raises its ERROR; None
        when its connection was lost (make it again on the next one); raises
        TimedOut when it is still unanswered (its late reply will be ignored)."""
        if pending.reply is not None:
            return pending.reply
        if pending.error is not None:
            raise pending.error
        self.forget(pending)
        if pending.lost or pending.generation != self.generation or not self.connected:
            return None
        raise pending.timed_out()

    def sent_to(self, pending: Pending) -> int:
        """After the SEND of `send_to` (a session not attached here): its seq. Raises
        its ERROR, TimedOut, or DaemonUnavailable when the connection was lost: with
        no attach, no SENT_SEQ tells whether the message was stored."""
        reply = self.outcome(pending)
        if reply is None:
            raise DaemonUnavailable("the connection to imagentd was lost before ACCEPTED")
        return reply.integer(p.SEQ)

    def _take_request_id(self) -> int:
        """The next u32 id above 0 that no request awaiting its reply holds."""
        while True:
            request = self._next_request
            self._next_request = request + 1 if request < 0xFFFFFFFF else 1  # 0 is for events
            if request not in self.pending:
                return request

    def _register(self, pending: Pending) -> Pending:
        self.pending[pending.request] = pending
        return pending

    def forget(self, pending: Pending) -> None:
        """A request nobody waits for any more: its reply, if one comes, is ignored."""
        self.pending.pop(pending.request, None)

    def take_outgoing(self) -> bytes:
        """Frames the core wants written (ACKs again after a re-attach)."""
        if not self._outgoing:
            return b""
        data = b"".join(self._outgoing)
        self._outgoing.clear()
        return data

    def ack_frame(self, session: int, seq: int) -> bytes | None:
        """Records the program's ACK; returns the frame to write now, or None when the
        session is not attached on this connection (it is sent after the re-attach).
        Raises ClientClosed once the client is closed."""
        self.check_open()
        state = self.sessions.get(session)
        if state is None or seq <= state.program_acked:
            return None  # gone, or acknowledged already (ACK is cumulative)
        state.program_acked = seq
        if not self.connected or state.attached_generation != self.generation:
            return None
        return p.ack_frame(session, seq)

    # MARK: Input

    def feed(self, data: bytes | bytearray | memoryview) -> None:
        """Handles the frames `data` completes; raises ProtocolError on a bad frame."""
        for frame in self.decoder.feed(data):
            self.handle(frame)

    def handle(self, frame: p.Frame) -> None:
        op = frame.op
        if op == p.EV_MESSAGE:
            self._message(frame)
        elif frame.request != 0:
            pending = self.pending.pop(frame.request, None)
            # Also for a request whose caller stopped waiting: what it did to a
            # session the program holds is kept.
            if op == p.OPENED:
                self._opened(frame, awaited=pending is not None)
            elif op == p.ACCEPTED:
                state = self.sessions.get(frame.integer(p.SESSION))
                if state is not None:
                    state.last_accepted = max(state.last_accepted, frame.integer(p.SEQ))
            if pending is None:
                return
            if op == p.ERROR:
                pending.error = _error_of(frame)
            else:
                pending.reply = frame
            pending.wake()
        elif op == p.ERROR:
            error = _error_of(frame)
            self.last_unsolicited_error = error
            self.add_event(ErrorEvent(error))
        elif op == p.EV_ACKED:
            session, seq = frame.integer(p.SESSION), frame.integer(p.SEQ)
            state = self.sessions.get(session)
            if state is not None:
                state.acked_seq = max(state.acked_seq, seq)
            self.add_event(AckedEvent(session, seq))
        elif op == p.EV_EXPIRED:
            error = _error_of(frame)
            self.add_event(ExpiredEvent(frame.integer(p.SESSION), frame.integer(p.SEQ), error))
        elif op == p.EV_SESSION_STATE:
            self._session_state(frame)
        elif op == p.EV_LINK_STATE:
            self.link_state = frame.integer(p.LINK_STATE)
            self.add_event(LinkStateEvent(self.link_state))
        elif op == p.EV_EVENT:
            document = frame.json_value()
            self.add_event(WatchEvent(document if isinstance(document, dict) else {"value": document}))
        # Any other op is a newer daemon's: skipped.

    def _message(self, frame: p.Frame) -> None:
        records = frame.records
        try:
            session = int.from_bytes(records[p.SESSION], "big")
            seq = int.from_bytes(records[p.SEQ], "big")
            payload = records[p.PAYLOAD]
        except KeyError:
            raise p.ProtocolError("MESSAGE without SESSION, SEQ or PAYLOAD") from None
        state = self.sessions.get(session)
        if state is None or state.released:
            return
        if seq <= state.highest_received:
            self.redeliveries_dropped += 1
            return
        state.highest_received = seq
        state.queue.append(Message(session, seq, payload, self.ack_callback))
        self.queued += 1

    def _opened(self, frame: p.Frame, awaited: bool) -> None:
        session = frame.integer(p.SESSION)
        state = self.sessions.get(session)
        if state is None:
            if not awaited:
                # An open() or attach() that gave up: the program never gets this
                # session, so it is not held, queued for or re-attached here.
                return
            state = self.sessions[session] = SessionState(session)
        state.attached_generation = self.generation
        state.state = frame.integer(p.SESSION_STATE)
        # The daemon counts every SEND that will ever be ACCEPTED: a send in flight
        # is stored exactly when SENT_SEQ passed the last seq we saw ACCEPTED.
        state.last_accepted = max(state.last_accepted, frame.integer(p.SENT_SEQ))
        state.acked_seq = max(state.acked_seq, frame.integer(p.ACKED_SEQ))
        delivered = frame.integer(p.DELIVERED_SEQ)
        state.highest_received = max(state.highest_received, delivered)
        if state.program_acked > delivered:
            self._outgoing.append(p.ack_frame(session, state.program_acked))

    def _session_state(self, frame: p.Frame) -> None:
        session, value = frame.integer(p.SESSION), frame.integer(p.SESSION_STATE)
        code = frame.optional_integer(p.CODE)
        error = ipc_error(code, frame.text(p.MESSAGE, "")) if code is not None else None
        state = self.sessions.get(session)
        if state is not None:
            state.state = value
            if value == SESSION_CLOSED_STATE and state.error is None:
                state.error = error if error is not None else SessionClosed("the session was closed")
        self.add_event(SessionStateEvent(session, value, error))

    def add_event(self, event: Event) -> None:
        if len(self.events) == self.events.maxlen:
            self.events_dropped += 1
        self.events.append(event)

    # MARK: Program side

    def check_open(self) -> None:
        if self.closed:
            raise ClientClosed("the client is closed")

    def check_payload(self, payload: bytes) -> None:
        """Refuses what the daemon would refuse, without sending it."""
        if len(payload) > self.max_payload:
            raise PayloadTooLarge(f"payload of {len(payload)} bytes above the daemon's MAX_PAYLOAD {self.max_payload}")

    def opened_session(self, opened: p.Frame) -> SessionState:
        """The session an OPENED reply attached (recorded when it was handled)."""
        return self.sessions[opened.integer(p.SESSION)]

    def session_for(self, session_id: int) -> SessionState:
        """The attached session `session_id`, or a detached stand-in for one not attached here."""
        return self.sessions.get(session_id) or SessionState(checked_session_id(session_id))

    def take_message(self, state: SessionState) -> Message | None:
        """The session's next queued message, None when none is queued. Raises the
        session's error (closed, not ours), or ClientClosed once the program closed
        or detached it, or closed the client."""
        if state.queue:
            self.queued -= 1
            return state.queue.popleft()
        if state.error is not None:
            raise state.error
        if state.released or self.closed:
            raise ClientClosed("the session was closed or detached by this program")
        return None

    def take_events(self) -> list[Event]:
        taken = list(self.events)
        self.events.clear()
        return taken

    def forget_session(self, session: int) -> None:
        """The program closed or detached the session: forget it."""
        state = self.sessions.pop(session, None)
        if state is not None:
            state.released = True
            self.queued -= len(state.queue)
            state.queue.clear()


# MARK: What both clients show the program


class ClientBase:
    """The part of `imagent.Client` and `imagent.aio.Client` that only reads the core."""

    def __init__(self, path: str, name: str | None, timeout: float | None) -> None:
        self.path = path
        self.timeout = timeout
        self._core = ClientCore(name)

    @property
    def daemon_version(self) -> str:
        """The daemon's version, from its last WELCOME."""
        return self._core.daemon_version

    @property
    def max_payload(self) -> int:
        """The largest payload the daemon accepts (WELCOME's MAX_PAYLOAD)."""
        return self._core.max_payload

    @property
    def link_state(self) -> int:
        """The daemon's link to the server: 0 disconnected, 1 connecting, 2 connected, 3 disconnecting."""
        return self._core.link_state

    def _call_deadline(self, timeout: float | None) -> float | None:
        """A call's deadline: its own timeout, else the client's."""
        return deadline_after(self.timeout if timeout is None else timeout)


class SessionBase:
    """The part of `imagent.Session` and `imagent.aio.Session` that only reads the core."""

    def __init__(self, state: SessionState) -> None:
        self._state = state
        self.id = state.id

    @property
    def sent_seq(self) -> int:
        """The highest outbound seq ACCEPTED (OPENED's SENT_SEQ, then each send's)."""
        return self._state.last_accepted

    @property
    def acked_seq(self) -> int:
        """The highest outbound seq the server has acknowledged (ACKED events)."""
        return self._state.acked_seq

    @property
    def state(self) -> int:
        """0 pending, 1 open, 2 paused, 3 failed, 4 closed (SESSION_STATE)."""
        return self._state.state

    def __repr__(self) -> str:
        return f"Session(id={self.id})"


def _error_of(frame: p.Frame) -> IPCError:
    """The exception for an ERROR's (or EXPIRED's) CODE and MESSAGE."""
    return ipc_error(frame.integer(p.CODE), frame.text(p.MESSAGE, ""))


def _no_ack(session: int, seq: int) -> None:
    raise NotImplementedError("a core without a client")


def checked_session_id(value: int) -> int:
    """`value` as a SESSION record's u64; ValueError when it is not one."""
    if not isinstance(value, int) or not 0 < value < 1 << 64:
        raise ValueError(f"{value!r} is not a session id (a u64 above 0)")
    return value


def json_result(frame: p.Frame) -> dict[str, Any]:
    """RESULT's JSON object."""
    document = frame.json_value()
    if not isinstance(document, dict):
        raise p.ProtocolError("RESULT's JSON is not an object")
    return document


def ttl_milliseconds(ttl: float | None) -> int | None:
    if ttl is None or ttl <= 0:
        return None
    return min(0xFFFFFFFF, max(1, round(ttl * 1000)))


def program_name() -> str:
    """The default CLIENT_NAME: the program's file name."""
    return os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] else "python"


def retry_allowed(path: str, deadline: float | None) -> None:
    """Before a request lost with its connection is made again: raises
    DaemonUnavailable once the call's time is up. (A reconnect gets a grace for
    its handshake, so without this a daemon that keeps closing the connection
    would keep a call going past its timeout.)"""
    if passed(deadline):
        raise DaemonUnavailable(f"imagentd at {path} went away and was not back in time")


def deadline_after(timeout: float | None) -> float | None:
    return None if timeout is None else time.monotonic() + timeout


def remaining(deadline: float | None) -> float | None:
    return None if deadline is None else max(0.0, deadline - time.monotonic())


def passed(deadline: float | None) -> bool:
    return deadline is not None and time.monotonic() >= deadline
