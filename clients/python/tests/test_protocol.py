"""The codec against imagent-ipc(7)'s worked example, the shared vectors and hostile input."""

from __future__ import annotations

import json
import os
import random
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src"))

import imagent  # noqa: E402
from imagent import protocol as p  # noqa: E402
from imagent.core import BACKOFF_CAP, backoff  # noqa: E402
from imagent.errors import ipc_error  # noqa: E402

REPO = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..")
VECTORS = os.path.join(REPO, "..", "shared", "vectors", "ipc.json")
NAMES = {name: op for op, name in p.OP_NAMES.items()}
TAGS = {name: tag for tag, name in p.TAG_NAMES.items()}

# imagent-ipc(7), WORKED EXAMPLE: every frame of the conversation, in order.
WORKED_EXAMPLE = [
    "00000017 0001 00000001 0001 00000001 01 0002 00000004 64656d6f",
    "00000029 8001 00000001 0001 00000001 01 0003 00000005 302e312e30 0004 00000004 00100000 0005 00000001 02",
    "0000001e 0002 00000002 0011 00000004 63686174 0012 00000001 00 0013 00000001 01",
    "00000045 8002 00000002 0010 00000008 0123456789abcdef 0014 00000001 01 0016 00000008 0000000000000000"
    " 0017 00000008 0000000000000000 0018 00000008 0000000000000000",
    "00000026 0005 00000003 0010 00000008 0123456789abcdef 001a 00000002 6869 0019 00000004 0000ea60",
    "00000022 8005 00000003 0010 00000008 0123456789abcdef 0015 00000008 0000000000000001",
    "00000022 9002 00000000 0010 00000008 0123456789abcdef 0015 00000008 0000000000000001",
    "0000002a 9001 00000000 0010 00000008 0123456789abcdef 0015 00000008 000000000000000c 001a 00000002 00ff",
    "00000022 0006 00000000 0010 00000008 0123456789abcdef 0015 00000008 000000000000000c",
    "00000006 0010 00000009",
    "00000020 8010 00000009 0022 00000014 7b226c696e6b223a22636f6e6e6563746564227d",
    "00000031 ffff 00000004 0020 00000002 0005 0021 0000001d 73657373696f6e2069732061 7474616368656420656c73657768657265",
    "00000006 007f 0000004d",
]
SESSION_ID = 0x0123456789ABCDEF


def unhex(text: str) -> bytes:
    return bytes.fromhex(text.replace(" ", ""))


def field_value(tag: int, value: object) -> int | str | bytes:
    if tag == p.PAYLOAD:
        assert isinstance(value, str)
        return bytes.fromhex(value)
    assert isinstance(value, (int, str))
    return value


def decoded_value(frame: p.Frame, tag: int) -> int | str | bytes:
    if tag in p.TAG_SIZES:
        return frame.integer(tag)
    if tag in p.TEXT_TAGS:
        return frame.text(tag)
    return frame.records[tag]


class WorkedExampleTests(unittest.TestCase):
    frames = [unhex(text) for text in WORKED_EXAMPLE]
    stream = b"".join(frames)

    def expect_conversation(self, decoded: list[p.Frame]) -> None:
        self.assertEqual([(f.op, f.request) for f in decoded],
                         [(p.HELLO, 1), (p.WELCOME, 1), (p.OPEN, 2), (p.OPENED, 2), (p.SEND, 3), (p.ACCEPTED, 3),
                          (p.EV_ACKED, 0), (p.EV_MESSAGE, 0), (p.ACK, 0), (p.STATUS, 9), (p.RESULT, 9), (p.ERROR, 4),
                          (p.PING, 77)])
        welcome, message, error = decoded[1], decoded[7], decoded[11]
        self.assertEqual(welcome.integer(p.MAX_PAYLOAD), 1048576)
        self.assertEqual(welcome.text(p.DAEMON_VERSION), "0.1.0")
        self.assertEqual((message.integer(p.SESSION), message.integer(p.SEQ), message.records[p.PAYLOAD]),
                         (SESSION_ID, 12, b"\x00\xff"))
        self.assertEqual((error.integer(p.CODE), error.text(p.MESSAGE)), (5, "session is attached elsewhere"))

    def test_the_whole_conversation_decodes_at_once(self) -> None:
        self.expect_conversation(p.FrameDecoder().feed(self.stream))

    def test_the_conversation_decodes_byte_by_byte(self) -> None:
        decoder = p.FrameDecoder()
        decoded = [frame for i in range(len(self.stream)) for frame in decoder.feed(self.stream[i:i + 1])]
        self.expect_conversation(decoded)
        self.assertEqual(decoder.buffered, 0)

    def test_the_conversation_decodes_in_random_pieces(self) -> None:
        generator = random.Random(25)
        for _ in range(50):
            decoder, decoded, i = p.FrameDecoder(), [], 0
            while i < len(self.stream):
                step = generator.randint(1, 40)
                decoded += decoder.feed(memoryview(self.stream)[i:i + step])
                i += step
            self.expect_conversation(decoded)

    def test_the_client_builds_the_example_s_requests(self) -> None:
        hello = p.encode(p.HELLO, 1, p.u8(p.IPC_VERSION, 1) + p.text(p.CLIENT_NAME, "demo"))
        open_ = p.encode(p.OPEN, 2, p.text(p.SERVICE, "chat") + p.u8(p.PRIORITY, 0) + p.u8(p.DURABLE, 1))
        ack = p.encode(p.ACK, 0, p.u64(p.SESSION, SESSION_ID) + p.u64(p.SEQ, 12))
        self.assertEqual(hello, self.frames[0])
        self.assertEqual(open_, self.frames[2])
        self.assertEqual(p.send_frame(3, SESSION_ID, b"hi", 60000), self.frames[4])
        self.assertEqual(ack, self.frames[8])
        self.assertEqual(p.encode(p.STATUS, 9), self.frames[9])
        self.assertEqual(p.encode(p.PING, 77), self.frames[12])


class SharedVectorTests(unittest.TestCase):
    def setUp(self) -> None:
        if not os.path.exists(VECTORS):
            self.skipTest(f"{VECTORS} is not there")
        with open(VECTORS, encoding="utf-8") as file:
            self.vectors = json.load(file)

    def test_every_valid_vector_decodes_to_its_fields_and_encodes_back(self) -> None:
        for vector in self.vectors["valid"]:
            with self.subTest(vector["name"]):
                data = bytes.fromhex(vector["hex"])
                frame = p.decode(data)
                self.assertEqual(frame.op, NAMES[vector["op"]])
                self.assertEqual(frame.request, vector["request"])
                fields = {TAGS[name]: field_value(TAGS[name], value) for name, value in vector["fields"].items()}
                self.assertEqual({tag: decoded_value(frame, tag) for tag in frame.records}, fields)
                self.assertEqual(p.encode_fields(frame.op, frame.request, fields), data)

    def test_every_invalid_vector_is_refused(self) -> None:
        for vector in self.vectors["invalid"]:
            with self.subTest(vector["name"]):
                data = bytes.fromhex(vector["hex"])
                if vector["name"] == "unknown_op":
                    # The daemon refuses a request it does not know; a client skips a
                    # frame it does not know (a newer daemon's event).
                    self.assertEqual(p.decode(data).op, 0x0777)
                    continue
                with self.assertRaises(p.ProtocolError):
                    p.decode(data)

    def test_a_huge_length_is_refused_from_its_first_four_bytes(self) -> None:
        data = next(bytes.fromhex(v["hex"]) for v in self.vectors["invalid"] if v["name"] == "huge_length")
        decoder = p.FrameDecoder()
        with self.assertRaises(p.ProtocolError):
            decoder.feed(data[:4])
        self.assertEqual(decoder.buffered, 0)


class HostileInputTests(unittest.TestCase):
    def frame(self, op: int, records: bytes) -> bytes:
        return p.encode(op, 1, records)

    def test_a_known_tag_twice_is_refused(self) -> None:
        with self.assertRaises(p.ProtocolError):
            p.decode(self.frame(p.ACCEPTED, p.u64(p.SEQ, 1) + p.u64(p.SEQ, 2)))

    def test_a_known_tag_of_the_wrong_size_is_refused(self) -> None:
        with self.assertRaises(p.ProtocolError):
            p.decode(self.frame(p.ACCEPTED, p.record(p.SEQ, b"\x01")))

    def test_unknown_tags_and_tags_of_other_ops_are_skipped(self) -> None:
        frame = p.decode(self.frame(p.ACCEPTED, p.record(0x7777, b"xyz") + p.record(p.CODE, b"odd size")
                                    + p.u64(p.SEQ, 5)))
        self.assertEqual(frame.records, {p.SEQ: (5).to_bytes(8, "big")})

    def test_text_must_be_utf8(self) -> None:
        with self.assertRaises(p.ProtocolError):
            p.decode(self.frame(p.RESULT, p.record(p.JSON, b"\xff\xfe")))

    def test_a_record_header_cut_by_the_frame_end_is_refused(self) -> None:
        with self.assertRaises(p.ProtocolError):
            p.decode(self.frame(p.OK, b"\x00\x10\x00"))

    def test_a_frame_just_above_the_limit_is_refused_and_at_the_limit_waits(self) -> None:
        limit = 1024 + p.FRAME_OVERHEAD
        with self.assertRaises(p.ProtocolError):
            p.FrameDecoder(1024).feed((limit + 1).to_bytes(4, "big"))
        decoder = p.FrameDecoder(1024)
        self.assertEqual(decoder.feed(limit.to_bytes(4, "big") + b"\x80\x00"), [])

    def test_random_garbage_raises_only_protocol_errors(self) -> None:
        generator = random.Random(7)
        valid = b"".join(unhex(text) for text in WORKED_EXAMPLE)
        for _ in range(2000):
            data = bytearray(valid)
            for _ in range(generator.randint(1, 8)):
                data[generator.randrange(len(data))] = generator.randrange(256)
            try:
                p.FrameDecoder().feed(bytes(data))
            except p.ProtocolError:
                pass

    def test_a_missing_required_record_is_a_protocol_error(self) -> None:
        with self.assertRaises(p.ProtocolError):
            p.decode(self.frame(p.ACCEPTED, b"")).integer(p.SEQ)


class ErrorTests(unittest.TestCase):
    def test_each_code_has_its_class_under_ipc_error(self) -> None:
        expected = [imagent.BadRequest, imagent.VersionUnsupported, imagent.UnknownSession, imagent.PermissionDenied,
                    imagent.SessionBusy, imagent.QueueFull, imagent.PayloadTooLarge, imagent.ShuttingDown,
                    imagent.Internal, imagent.UpstreamRejected, imagent.SessionClosed, imagent.LimitReached,
                    imagent.Expired]
        for code, cls in enumerate(expected, start=1):
            error = ipc_error(code, "why")
            self.assertIs(type(error), cls)
            self.assertIsInstance(error, imagent.IPCError)
            self.assertIsInstance(error, imagent.Error)
            self.assertEqual((error.code, error.message), (code, "why"))

    def test_an_unknown_code_is_an_ipc_error_with_that_code(self) -> None:
        error = ipc_error(42, "new")
        self.assertIs(type(error), imagent.IPCError)
        self.assertEqual(error.code, 42)
        self.assertEqual(imagent.error_name(error), "ERROR_42")

    def test_names_and_the_library_s_own_errors(self) -> None:
        self.assertEqual(imagent.error_name(imagent.QueueFull("x")), "QUEUE_FULL")
        self.assertEqual(imagent.error_name(imagent.DaemonUnavailable("x")), "DAEMON_UNAVAILABLE")
        self.assertEqual(imagent.error_name(imagent.TimedOut("x")), "TIMED_OUT")
        self.assertTrue(issubclass(imagent.TimedOut, TimeoutError))
        self.assertTrue(issubclass(imagent.DaemonUnavailable, imagent.Error))


class BackoffTests(unittest.TestCase):
    def test_the_first_attempt_is_at_once_and_the_delay_is_capped(self) -> None:
        self.assertEqual(backoff(0), 0.0)
        delays = [backoff(n, jitter=1.0) for n in range(20)]
        self.assertEqual(delays, sorted(delays))
        self.assertEqual(max(delays), BACKOFF_CAP)
        for n in range(20):
            self.assertLessEqual(backoff(n), BACKOFF_CAP)
            self.assertGreaterEqual(backoff(n), backoff(n, jitter=0.5))


if __name__ == "__main__":
    unittest.main()
