"""A scripted imagentd for the client tests: a thread with a Unix socket in a
temporary folder, enough of Agent IPC/1 (HELLO, OPEN, SEND, ACK, CLOSE, DETACH,
STATUS, PING) and an `echo` service, with state that survives `restart()`, and
faults to inject (drop the connection around a SEND, refuse with an ERROR)."""

from __future__ import annotations

import json
import os
import socket
import sys
import threading
import time
from dataclasses import dataclass, field

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src"))

from imagent import protocol as p  # noqa: E402


@dataclass
class FakeSession:
    id: int
    service: str
    outbound: list[bytes] = field(default_factory=list)
    inbound: list[bytes] = field(default_factory=list)
    delivered: int = 0
    closed: bool = False
    attached: socket.socket | None = None


class FakeDaemon:
    def __init__(self, directory: str, *, admin: bool = False, max_payload: int = 1 << 20) -> None:
        self.path = os.path.join(directory, "imagent.sock")
        self.admin = admin
        self.max_payload = max_payload
        self.sessions: dict[int, FakeSession] = {}
        self.lock = threading.RLock()
        self.faults: list[tuple[int, str]] = []
        self.acks: list[tuple[int, int]] = []
        self.hellos: list[str] = []
        self.requests: list[int] = []
        #: An ERROR code sent with request 0 to each new connection, which is then closed.
        self.refuse_code: int | None = None
        self._next_id = 0x1000
        self._connections: list[socket.socket] = []
        self._listeners: list[socket.socket] = []
        self._write_locks: dict[socket.socket, threading.Lock] = {}
        self.start()

    # MARK: Control

    def start(self) -> None:
        paths = [self.path + ".admin", self.path] if self.admin else [self.path]
        for path in paths:
            listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            listener.bind(path)
            listener.listen(16)
            self._listeners.append(listener)
            threading.Thread(target=self._accept, args=(listener, path), daemon=True).start()

    def stop(self) -> None:
        """As a kill: listeners and connections gone, the socket file removed."""
        with self.lock:
            for listener in self._listeners:
                listener.close()
            self._listeners.clear()
            for path in (self.path, self.path + ".admin"):
                if os.path.exists(path):
                    os.unlink(path)
            for connection in self._connections:
                try:
                    connection.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
            self._connections.clear()
            for session in self.sessions.values():
                session.attached = None

    def restart(self, down_for: float = 0.0) -> None:
        self.stop()
        if down_for:
            timer = threading.Timer(down_for, self.start)
            timer.daemon = True
            timer.start()
        else:
            self.start()

    def fault(self, op: int, action: str) -> None:
        """The next request `op` gets `action`: "drop-before-store", "drop-after-store",
        "store-silent" (SEND), "error:CODE", "silent" (no reply, nothing done),
        "drop" (the connection closed, nothing done) or "answer-then-drop"."""
        with self.lock:
            self.faults.append((op, action))

    def push(self, session: int, frame: bytes) -> None:
        """Writes `frame` to the connection the session is attached to."""
        with self.lock:
            connection = self.sessions[session].attached
        assert connection is not None
        self._write(connection, frame)

    def deliver(self, session: int, payload: bytes) -> int:
        """An inbound message from the server: stored, and sent if the session is attached."""
        with self.lock:
            state = self.sessions[session]
            state.inbound.append(payload)
            seq = len(state.inbound)
            connection = state.attached
        if connection is not None:
            self._write(connection, self._message(session, seq, payload))
        return seq

    def close(self) -> None:
        self.stop()

    # MARK: Serving

    def _accept(self, listener: socket.socket, path: str) -> None:
        while True:
            try:
                connection, _ = listener.accept()
            except OSError:
                return
            if self.refuse_code is not None:
                connection.sendall(self._error(0, self.refuse_code, "refused"))
                connection.close()
                continue
            with self.lock:
                self._connections.append(connection)
                self._write_locks[connection] = threading.Lock()
            threading.Thread(target=self._serve, args=(connection, path), daemon=True).start()

    def _serve(self, connection: socket.socket, path: str) -> None:
        decoder = p.FrameDecoder(self.max_payload)
        try:
            while True:
                data = connection.recv(65536)
                if not data:
                    return
                for frame in decoder.feed(data):
                    if not self._handle(connection, frame, path):
                        return
        except OSError:
            return
        finally:
            with self.lock:
                for session in self.sessions.values():
                    if session.attached is connection:
                        session.attached = None
                if connection in self._connections:
                    self._connections.remove(connection)
            try:
                connection.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            connection.close()

    def _write(self, connection: socket.socket, data: bytes) -> None:
        lock = self._write_locks.get(connection)
        if lock is None:
            return
        with lock:
            try:
                connection.sendall(data)
            except OSError:
                pass

    def _message(self, session: int, seq: int, payload: bytes) -> bytes:
        return p.encode(p.EV_MESSAGE, 0, p.u64(p.SESSION, session) + p.u64(p.SEQ, seq) + p.record(p.PAYLOAD, payload))

    def _error(self, request: int, code: int, message: str) -> bytes:
        return p.encode(p.ERROR, request, p.record(p.CODE, code.to_bytes(2, "big")) + p.text(p.MESSAGE, message))

    def _handle(self, connection: socket.socket, frame: p.Frame, path: str) -> bool:
        """False: close the connection."""
        op, request, records = frame.op, frame.request, frame.records
        reply: bytes | None = None
        after: list[bytes] = []
        with self.lock:
            self.requests.append(op)
            action = next((a for o, a in self.faults if o == op), None)
            if action is not None:
                self.faults.remove((op, action))
            if action == "silent":
                return True
            if action == "drop":
                return False
            if action and action.startswith("error:"):
                self._write(connection, self._error(request, int(action[6:]), "injected"))
                return True
            if op == p.HELLO:
                self.hellos.append(path)
                reply = p.encode(p.WELCOME, request, p.u8(p.IPC_VERSION, 1) + p.text(p.DAEMON_VERSION, "fake")
                                 + p.u32(p.MAX_PAYLOAD, self.max_payload) + p.u8(p.LINK_STATE, 2))
            elif op == p.OPEN:
                session_id = frame.optional_integer(p.SESSION) or 0
                if session_id:
                    state = self.sessions.get(session_id)
                    if state is None:
                        reply = self._error(request, 3, "no such session")
                    elif state.closed:
                        reply = self._error(request, 11, "closed")
                    elif state.attached is not None and state.attached is not connection:
                        reply = self._error(request, 5, "attached elsewhere")
                else:
                    self._next_id += 1
                    state = self.sessions[self._next_id] = FakeSession(self._next_id, frame.text(p.SERVICE))
                if reply is None:
                    assert state is not None
                    state.attached = connection
                    reply = p.encode(p.OPENED, request, p.u64(p.SESSION, state.id) + p.u8(p.SESSION_STATE, 1)
                                     + p.u64(p.SENT_SEQ, len(state.outbound)) + p.u64(p.ACKED_SEQ, 0)
                                     + p.u64(p.DELIVERED_SEQ, state.delivered))
                    after = [self._message(state.id, seq, state.inbound[seq - 1])
                             for seq in range(state.delivered + 1, len(state.inbound) + 1)]
            elif op == p.SEND:
                state = self.sessions.get(frame.integer(p.SESSION))
                if state is None:
                    reply = self._error(request, 3, "no such session")
                elif action == "drop-before-store":
                    return False
                else:
                    payload = records[p.PAYLOAD]
                    state.outbound.append(payload)
                    if action == "drop-after-store":
                        return False
                    if action == "store-silent":
                        return True
                    reply = p.encode(p.ACCEPTED, request, p.u64(p.SESSION, state.id) + p.u64(p.SEQ, len(state.outbound)))
                    if state.service == "echo":
                        state.inbound.append(payload)
                        if state.attached is connection:
                            after = [self._message(state.id, len(state.inbound), payload)]
            elif op == p.ACK:
                session_id, seq = frame.integer(p.SESSION), frame.integer(p.SEQ)
                self.sessions[session_id].delivered = max(self.sessions[session_id].delivered, seq)
                self.acks.append((session_id, seq))
            elif op in (p.CLOSE, p.DETACH):
                state = self.sessions.get(frame.integer(p.SESSION))
                if state is None:
                    reply = self._error(request, 3, "no such session")
                elif state.closed:
                    reply = self._error(request, 11, "closed")
                else:
                    state.closed = state.closed or op == p.CLOSE
                    state.attached = None
                    reply = p.encode(p.OK, request)
            elif op in (p.STATUS, p.SESSIONS, p.METRICS):
                reply = p.encode(p.RESULT, request, p.text(p.JSON, json.dumps({"link": {"state": "connected"}})))
            elif op == p.PING:
                reply = p.encode(p.PONG, request)
            elif op == p.WATCH:
                reply = p.encode(p.OK, request)
            else:
                reply = self._error(request, 1, "unknown op")
        if reply is not None:
            self._write(connection, reply + b"".join(after))
        return action != "answer-then-drop"


def wait_until(condition: "object", timeout: float = 5.0) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if callable(condition) and condition():
            return True
        time.sleep(0.01)
    return False
