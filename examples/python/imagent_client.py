#!/usr/bin/env python3
"""A minimal Agent IPC/1 client for imagentd, written from imagent-ipc(7) alone.

Standard library only. Use it as a module (class Client) or from the shell:

    imagent_client.py [--socket PATH] status        # the daemon's STATUS document
    imagent_client.py [--socket PATH] ping          # round trip to the daemon
    imagent_client.py [--socket PATH] echo SERVICE TEXT...
        # opens a session to SERVICE, sends each TEXT, prints what comes back
        # (with the reference server's "echo" service: the same texts), acks it,
        # and closes the session

Exit status: 0 on success, 2 when no daemon listens, 4 when the daemon answers ERROR.
"""

import json
import os
import socket
import struct
import sys
import time

# Ops (imagent-ipc(7), REQUESTS, REPLIES and EVENTS)
HELLO, OPEN, CLOSE, DETACH, SEND, ACK = 0x0001, 0x0002, 0x0003, 0x0004, 0x0005, 0x0006
STATUS, SESSIONS, METRICS, WATCH, PING = 0x0010, 0x0011, 0x0012, 0x0013, 0x007F
OK, WELCOME, OPENED, ACCEPTED, RESULT, PONG, ERROR = 0x8000, 0x8001, 0x8002, 0x8005, 0x8010, 0x807F, 0xFFFF
EV_MESSAGE, EV_ACKED, EV_EXPIRED, EV_SESSION_STATE, EV_LINK_STATE, EV_EVENT = 0x9001, 0x9002, 0x9003, 0x9004, 0x9005, 0x9010

# Record tags (RECORD TAGS)
IPC_VERSION, CLIENT_NAME, DAEMON_VERSION, MAX_PAYLOAD, LINK_STATE = 0x0001, 0x0002, 0x0003, 0x0004, 0x0005
SESSION, SERVICE, PRIORITY, DURABLE, SESSION_STATE = 0x0010, 0x0011, 0x0012, 0x0013, 0x0014
SEQ, SENT_SEQ, ACKED_SEQ, DELIVERED_SEQ, TTL_MS, PAYLOAD = 0x0015, 0x0016, 0x0017, 0x0018, 0x0019, 0x001A
CODE, MESSAGE, JSON_DOC = 0x0020, 0x0021, 0x0022

ERROR_NAMES = {1: "BAD_REQUEST", 2: "VERSION_UNSUPPORTED", 3: "UNKNOWN_SESSION", 4: "PERMISSION_DENIED",
               5: "SESSION_BUSY", 6: "QUEUE_FULL", 7: "PAYLOAD_TOO_LARGE", 8: "SHUTTING_DOWN", 9: "INTERNAL",
               10: "UPSTREAM_REJECTED", 11: "SESSION_CLOSED", 12: "LIMIT_REACHED", 13: "EXPIRED"}


class DaemonError(Exception):
    """An ERROR frame: the daemon refused a request."""

    def __init__(self, code, message):
        super().__init__(f"{ERROR_NAMES.get(code, code)}: {message}")
        self.code = code


def socket_path(explicit=None):
    """THE SOCKET: explicit path, $IMAGENT_SOCKET, the system socket, then the user socket."""
    if explicit:
        return explicit
    if os.environ.get("IMAGENT_SOCKET"):
        return os.environ["IMAGENT_SOCKET"]
    system = "/run/imagent/imagent.sock"
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    if not os.path.exists(system) and runtime and os.path.exists(f"{runtime}/imagent/imagent.sock"):
        return f"{runtime}/imagent/imagent.sock"
    return system


def record(tag, value):
    return struct.pack(">HI", tag, len(value)) + value


def u8(tag, n):
    return record(tag, struct.pack(">B", n))


def u32(tag, n):
    return record(tag, struct.pack(">I", n))


def u64(tag, n):
    return record(tag, struct.pack(">Q", n))


def text(tag, s):
    return record(tag, s.encode("utf-8"))


def parse_records(body):
    """TLV records → {tag: bytes}; unknown tags are kept and ignored by callers."""
    fields, i = {}, 0
    while i < len(body):
        if i + 6 > len(body):
            raise ValueError("record header runs past the frame")
        tag, length = struct.unpack_from(">HI", body, i)
        i += 6
        if i + length > len(body):
            raise ValueError(f"record {tag:#06x} runs past the frame")
        fields[tag] = body[i:i + length]
        i += length
    return fields


def number(fields, tag):
    return int.from_bytes(fields[tag], "big")


class Client:
    def __init__(self, path=None, name="python-example"):
        self.path = socket_path(path)
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.connect(self.path)
        self.next_request = 1
        self.events = []  # events that arrived while waiting for a reply
        welcome = self.request(HELLO, u8(IPC_VERSION, 1) + text(CLIENT_NAME, name))
        self.daemon_version = welcome[DAEMON_VERSION].decode()
        self.max_payload = number(welcome, MAX_PAYLOAD)

    def _read_exact(self, n):
        data = b""
        while len(data) < n:
            chunk = self.sock.recv(n - len(data))
            if not chunk:
                raise ConnectionError("imagentd closed the connection")
            data += chunk
        return data

    def read_frame(self):
        (length,) = struct.unpack(">I", self._read_exact(4))
        if length < 6:
            raise ValueError("frame length below 6")
        frame = self._read_exact(length)
        op, request = struct.unpack_from(">HI", frame)
        return op, request, parse_records(frame[6:])

    def send_frame(self, op, request, records=b""):
        self.sock.sendall(struct.pack(">IHI", 6 + len(records), op, request) + records)

    def request(self, op, records=b""):
        """Sends a request and returns its reply's records; ERROR raises DaemonError."""
        request_id = self.next_request
        self.next_request += 1
        self.send_frame(op, request_id, records)
        while True:
            reply_op, reply_id, fields = self.read_frame()
            if reply_id == 0 and reply_op != ERROR:
                self.events.append((reply_op, fields))
                continue
            if reply_id != request_id:
                continue
            if reply_op == ERROR:
                raise DaemonError(number(fields, CODE), fields.get(MESSAGE, b"").decode())
            return fields

    def next_event(self):
        if self.events:
            return self.events.pop(0)
        op, _, fields = self.read_frame()
        if op == ERROR:
            raise DaemonError(number(fields, CODE), fields.get(MESSAGE, b"").decode())
        return op, fields

    def status(self):
        return json.loads(self.request(STATUS)[JSON_DOC].decode())

    def ping(self):
        start = time.monotonic()
        self.request(PING)
        return time.monotonic() - start

    def open(self, service):
        return number(self.request(OPEN, text(SERVICE, service)), SESSION)

    def send(self, session, payload):
        return number(self.request(SEND, u64(SESSION, session) + record(PAYLOAD, payload)), SEQ)

    def ack(self, session, seq):
        self.send_frame(ACK, 0, u64(SESSION, session) + u64(SEQ, seq))

    def close_session(self, session):
        self.request(CLOSE, u64(SESSION, session))

    def close(self):
        self.sock.close()


def main(argv):
    path = None
    if len(argv) >= 2 and argv[0] == "--socket":
        path, argv = argv[1], argv[2:]
    if not argv:
        print(__doc__.strip(), file=sys.stderr)
        return 1
    try:
        client = Client(path)
    except (FileNotFoundError, ConnectionRefusedError) as error:
        print(f"imagentd is not running: cannot connect to {socket_path(path)} ({error.strerror})", file=sys.stderr)
        return 2
    try:
        if argv[0] == "status":
            print(json.dumps(client.status()))
        elif argv[0] == "ping":
            print(f"pong from imagentd {client.daemon_version}: {client.ping() * 1000:.3f} ms")
        elif argv[0] == "echo" and len(argv) >= 3:
            session = client.open(argv[1])
            for message in argv[2:]:
                client.send(session, message.encode())
            received = 0
            while received < len(argv) - 2:
                op, fields = client.next_event()
                if op == EV_MESSAGE and number(fields, SESSION) == session:
                    print(fields[PAYLOAD].decode(errors="replace"))
                    client.ack(session, number(fields, SEQ))
                    received += 1
            client.close_session(session)
        else:
            print(__doc__.strip(), file=sys.stderr)
            return 1
    except DaemonError as error:
        print(f"imagentd refused: {error}", file=sys.stderr)
        return 4
    finally:
        client.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
