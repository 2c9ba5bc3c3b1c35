"""Agent IPC/1 frames and records: encoding and decoding, no I/O.

Every frame, in both directions (imagent-ipc(7), FRAMES)::

     0               4       6               10
    +---------------+-------+---------------+-------------------+
    |  length: u32  | op:16 | request: u32  | records ...       |
    +---------------+-------+---------------+-------------------+
                    <------- length bytes (at least 6) --------->

and each record a TLV ``tag:16, len:u32, value``. Integers are big-endian.

A receiver looks records up by tag. A tag that the frame's op does not define
is skipped; a defined tag twice, or with a value of the wrong size, is an error,
as is a record running past its frame.
"""

from __future__ import annotations

import json
import struct
from typing import Any

# Requests
HELLO = 0x0001
OPEN = 0x0002
CLOSE = 0x0003
DETACH = 0x0004
SEND = 0x0005
ACK = 0x0006
STATUS = 0x0010
SESSIONS = 0x0011
METRICS = 0x0012
WATCH = 0x0013
EVENTS = 0x0014
PING = 0x007F
# Replies
OK = 0x8000
WELCOME = 0x8001
OPENED = 0x8002
ACCEPTED = 0x8005
RESULT = 0x8010
PONG = 0x807F
ERROR = 0xFFFF
# Events
EV_MESSAGE = 0x9001
EV_ACKED = 0x9002
EV_EXPIRED = 0x9003
EV_SESSION_STATE = 0x9004
EV_LINK_STATE = 0x9005
EV_EVENT = 0x9010

# Record tags
IPC_VERSION = 0x0001
CLIENT_NAME = 0x0002
DAEMON_VERSION = 0x0003
MAX_PAYLOAD = 0x0004
LINK_STATE = 0x0005
SESSION = 0x0010
SERVICE = 0x0011
PRIORITY = 0x0012
DURABLE = 0x0013
SESSION_STATE = 0x0014
SEQ = 0x0015
SENT_SEQ = 0x0016
ACKED_SEQ = 0x0017
DELIVERED_SEQ = 0x0018
TTL_MS = 0x0019
PAYLOAD = 0x001A
CODE = 0x0020
MESSAGE = 0x0021
JSON = 0x0022

OP_NAMES = {
    HELLO: "HELLO", OPEN: "OPEN", CLOSE: "CLOSE", DETACH: "DETACH", SEND: "SEND", ACK: "ACK",
    STATUS: "STATUS", SESSIONS: "SESSIONS", METRICS: "METRICS", WATCH: "WATCH", EVENTS: "EVENTS",
    PING: "PING", OK: "OK", WELCOME: "WELCOME", OPENED: "OPENED", ACCEPTED: "ACCEPTED",
    RESULT: "RESULT", PONG: "PONG", ERROR: "ERROR", EV_MESSAGE: "MESSAGE", EV_ACKED: "ACKED",
    EV_EXPIRED: "EXPIRED", EV_SESSION_STATE: "SESSION_STATE", EV_LINK_STATE: "LINK_STATE",
    EV_EVENT: "EVENT",
}

TAG_NAMES = {
    IPC_VERSION: "IPC_VERSION", CLIENT_NAME: "CLIENT_NAME", DAEMON_VERSION: "DAEMON_VERSION",
    MAX_PAYLOAD: "MAX_PAYLOAD", LINK_STATE: "LINK_STATE", SESSION: "SESSION", SERVICE: "SERVICE",
    PRIORITY: "PRIORITY", DURABLE: "DURABLE", SESSION_STATE: "SESSION_STATE", SEQ: "SEQ",
    SENT_SEQ: "SENT_SEQ", ACKED_SEQ: "ACKED_SEQ", DELIVERED_SEQ: "DELIVERED_SEQ", TTL_MS: "TTL_MS",
    PAYLOAD: "PAYLOAD", CODE: "CODE", MESSAGE: "MESSAGE", JSON: "JSON",
}

#: The size of each fixed-size record; the others are text or bytes.
TAG_SIZES = {
    IPC_VERSION: 1, MAX_PAYLOAD: 4, LINK_STATE: 1, SESSION: 8, PRIORITY: 1, DURABLE: 1,
    SESSION_STATE: 1, SEQ: 8, SENT_SEQ: 8, ACKED_SEQ: 8, DELIVERED_SEQ: 8, TTL_MS: 4, CODE: 2,
}
TEXT_TAGS = frozenset({CLIENT_NAME, DAEMON_VERSION, SERVICE, MESSAGE, JSON})

#: The tags each op defines (imagent-ipc(7), REQUESTS and EVENTS); others are skipped.
OP_TAGS: dict[int, frozenset[int]] = {
    HELLO: frozenset({IPC_VERSION, CLIENT_NAME}),
    WELCOME: frozenset({IPC_VERSION, DAEMON_VERSION, MAX_PAYLOAD, LINK_STATE}),
    OPEN: frozenset({SESSION, SERVICE, PRIORITY, DURABLE}),
    OPENED: frozenset({SESSION, SESSION_STATE, SENT_SEQ, ACKED_SEQ, DELIVERED_SEQ}),
    CLOSE: frozenset({SESSION}),
    DETACH: frozenset({SESSION}),
    SEND: frozenset({SESSION, PAYLOAD, TTL_MS}),
    ACCEPTED: frozenset({SESSION, SEQ}),
    ACK: frozenset({SESSION, SEQ}),
    RESULT: frozenset({JSON}),
    ERROR: frozenset({CODE, MESSAGE}),
    EV_MESSAGE: frozenset({SESSION, SEQ, PAYLOAD}),
    EV_ACKED: frozenset({SESSION, SEQ}),
    EV_EXPIRED: frozenset({SESSION, SEQ, CODE, MESSAGE}),
    EV_SESSION_STATE: frozenset({SESSION, SESSION_STATE, CODE, MESSAGE}),
    EV_LINK_STATE: frozenset({LINK_STATE}),
    EV_EVENT: frozenset({JSON}),
}
_NO_TAGS: frozenset[int] = frozenset()

#: Until WELCOME says otherwise (imagent-ipc(7), LIMITS).
DEFAULT_MAX_PAYLOAD = 1048576
#: The largest MAX_PAYLOAD a daemon may announce (imagentd.toml(5), max_payload_bytes):
#: a WELCOME above it cannot make the client buffer a larger frame.
MAX_PAYLOAD_CEILING = 16777216
#: A frame may exceed MAX_PAYLOAD by this much (the records around the payload).
FRAME_OVERHEAD = 65536

_HEADER = struct.Struct(">IHI")
_RECORD = struct.Struct(">HI")
_OP_REQUEST = struct.Struct(">HI")
_U8 = struct.Struct(">HIB")
_U32 = struct.Struct(">HII")
_U64 = struct.Struct(">HIQ")
_INT_FORMATS = {1: ">B", 2: ">H", 4: ">I", 8: ">Q"}


class ProtocolError(ValueError):
    """Bytes that are not a valid Agent IPC/1 frame."""


class Frame:
    """One decoded frame: its op, request id and the records its op defines."""

    __slots__ = ("op", "request", "records")

    def __init__(self, op: int, request: int, records: dict[int, bytes]) -> None:
        self.op = op
        self.request = request
        self.records = records

    def __repr__(self) -> str:
        names = ", ".join(TAG_NAMES.get(tag, hex(tag)) for tag in self.records)
        return f"Frame({OP_NAMES.get(self.op, hex(self.op))}, request={self.request}, records=[{names}])"

    def integer(self, tag: int) -> int:
        """A fixed-size record as an integer; ProtocolError when it is missing."""
        try:
            value = self.records[tag]
        except KeyError:
            raise ProtocolError(f"{OP_NAMES.get(self.op, hex(self.op))} without {TAG_NAMES.get(tag, hex(tag))}") from None
        return int.from_bytes(value, "big")

    def optional_integer(self, tag: int) -> int | None:
        value = self.records.get(tag)
        return None if value is None else int.from_bytes(value, "big")

    def text(self, tag: int, default: str | None = None) -> str:
        value = self.records.get(tag)
        if value is None:
            if default is None:
                raise ProtocolError(f"{OP_NAMES.get(self.op, hex(self.op))} without {TAG_NAMES.get(tag, hex(tag))}")
            return default
        return value.decode("utf-8")  # validated when decoded

    def json_value(self) -> Any:
        """The JSON record's value; ProtocolError when it is missing or not JSON."""
        try:
            return json.loads(self.text(JSON))
        except RecursionError:  # nested deeper than the parser goes: not a ValueError
            raise ProtocolError(f"{OP_NAMES.get(self.op, hex(self.op))}'s JSON is nested too deeply") from None
        except json.JSONDecodeError as error:
            raise ProtocolError(f"{OP_NAMES.get(self.op, hex(self.op))}'s JSON: {error}") from None


# MARK: Encoding


def record(tag: int, value: bytes) -> bytes:
    """One TLV record."""
    return _RECORD.pack(tag, len(value)) + value


def u8(tag: int, value: int) -> bytes:
    return _U8.pack(tag, 1, value)


def u32(tag: int, value: int) -> bytes:
    return _U32.pack(tag, 4, value)


def u64(tag: int, value: int) -> bytes:
    return _U64.pack(tag, 8, value)


def text(tag: int, value: str) -> bytes:
    return record(tag, value.encode("utf-8"))


def encode(op: int, request: int, records: bytes = b"") -> bytes:
    """A whole frame around already encoded records."""
    return _HEADER.pack(6 + len(records), op, request) + records


def encode_fields(op: int, request: int, fields: dict[int, int | str | bytes]) -> bytes:
    """A frame from tag → value: integers take their tag's size, str is UTF-8."""
    parts = []
    for tag, value in fields.items():
        if isinstance(value, int):
            size = TAG_SIZES[tag]
            parts.append(record(tag, struct.pack(_INT_FORMATS[size], value)))
        elif isinstance(value, str):
            parts.append(text(tag, value))
        else:
            parts.append(record(tag, value))
    return encode(op, request, b"".join(parts))


def session_record(session: int) -> bytes:
    """The SESSION record: what OPEN (attach), CLOSE and DETACH carry."""
    return _U64.pack(SESSION, 8, session)


def open_records(service: str, priority: int | None, durable: bool | None) -> bytes:
    """OPEN's records for a new session to `service`."""
    records = text(SERVICE, service)
    if priority is not None:
        records += u8(PRIORITY, priority)
    if durable is not None:
        records += u8(DURABLE, 1 if durable else 0)
    return records


def ack_frame(session: int, seq: int) -> bytes:
    """ACK (request 0: the daemon never answers it, except with an ERROR)."""
    return encode(ACK, 0, u64(SESSION, session) + u64(SEQ, seq))


def send_frame(request: int, session: int, payload: bytes, ttl_ms: int | None) -> bytes:
    """SEND, built with one copy of the payload."""
    tail = u32(TTL_MS, ttl_ms) if ttl_ms else b""
    length = 6 + 14 + 6 + len(payload) + len(tail)
    head = _HEADER.pack(length, SEND, request) + _U64.pack(SESSION, 8, session) + _RECORD.pack(PAYLOAD, len(payload))
    return b"".join((head, payload, tail))


# MARK: Decoding


def decode_records(op: int, body: memoryview | bytes, start: int, end: int) -> dict[int, bytes]:
    """The records of `body[start:end]` that `op` defines, checked."""
    known = OP_TAGS.get(op, _NO_TAGS)
    records: dict[int, bytes] = {}
    unpack = _RECORD.unpack_from
    i = start
    while i < end:
        if end - i < 6:
            raise ProtocolError("a record header runs past the frame")
        tag, size = unpack(body, i)
        i += 6
        if size > end - i:
            raise ProtocolError(f"record {tag:#06x} runs past the frame")
        if tag in known:
            if tag in records:
                raise ProtocolError(f"record {TAG_NAMES.get(tag, hex(tag))} twice in one frame")
            expected = TAG_SIZES.get(tag)
            if expected is not None and expected != size:
                raise ProtocolError(f"record {TAG_NAMES.get(tag, hex(tag))} of {size} bytes, not {expected}")
            value = bytes(body[i:i + size])
            if tag in TEXT_TAGS:
                try:
                    value.decode("utf-8")
                except UnicodeDecodeError:
                    raise ProtocolError(f"record {TAG_NAMES[tag]} is not UTF-8") from None
            records[tag] = value
        i += size
    return records


def decode(data: bytes, max_payload: int = DEFAULT_MAX_PAYLOAD) -> Frame:
    """Exactly one whole frame (tests, tools); FrameDecoder for a stream."""
    decoder = FrameDecoder(max_payload)
    frames = decoder.feed(data)
    if len(frames) != 1 or decoder.buffered:
        raise ProtocolError("not exactly one frame")
    return frames[0]


class FrameDecoder:
    """Splits a byte stream into frames.

    A length below 6, or above MAX_PAYLOAD + 64 KiB, is refused from the first
    four bytes, before anything is buffered for it. Whole frames are decoded
    straight from the bytes read; only a partial frame's bytes are kept.
    """

    __slots__ = ("max_payload", "_buffer")

    def __init__(self, max_payload: int = DEFAULT_MAX_PAYLOAD) -> None:
        self.max_payload = max_payload
        self._buffer = bytearray()

    @property
    def buffered(self) -> int:
        return len(self._buffer)

    def feed(self, data: bytes | bytearray | memoryview) -> list[Frame]:
        """The frames that `data` completes, in order; raises ProtocolError."""
        buffer = self._buffer
        if buffer:
            buffer += data
            source: bytes | bytearray | memoryview = buffer
        else:
            source = data
        frames: list[Frame] = []
        limit = self.max_payload + FRAME_OVERHEAD
        total = len(source)
        offset = 0
        view = memoryview(source)
        try:
            while total - offset >= 4:
                (length,) = struct.unpack_from(">I", view, offset)
                if length < 6:
                    raise ProtocolError(f"frame length {length} below 6")
                if length > limit:
                    raise ProtocolError(f"frame length {length} above MAX_PAYLOAD + 65536 ({limit})")
                end = offset + 4 + length
                if end > total:
                    break
                op, request = _OP_REQUEST.unpack_from(view, offset + 4)
                frames.append(Frame(op, request, decode_records(op, view, offset + 10, end)))
                offset = end
            if source is not buffer:
                self._buffer = bytearray(view[offset:])
        finally:
            view.release()
        if source is buffer and offset:
            del buffer[:offset]
        return frames
