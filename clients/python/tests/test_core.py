"""The core without I/O: frames in, decisions out (what both clients perform)."""

from __future__ import annotations

import os
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src"))

import imagent  # noqa: E402
from imagent import protocol as p  # noqa: E402
from imagent.core import ClientCore, Release, SendInFlight  # noqa: E402

SESSION = 7


def opened(request: int, sent_seq: int = 0, delivered_seq: int = 0) -> bytes:
    return p.encode_fields(p.OPENED, request, {p.SESSION: SESSION, p.SESSION_STATE: 1, p.SENT_SEQ: sent_seq,
                                               p.ACKED_SEQ: 0, p.DELIVERED_SEQ: delivered_seq})


def message(seq: int) -> bytes:
    return p.encode_fields(p.EV_MESSAGE, 0, {p.SESSION: SESSION, p.SEQ: seq, p.PAYLOAD: b"m"})


class CoreTests(unittest.TestCase):
    def setUp(self) -> None:
        self.core = ClientCore("tests")
        self.acks: list[tuple[int, int]] = []
        self.core.ack_callback = lambda session, seq: self.acks.append((session, seq))

    def connect(self) -> None:
        hello = self.core.connection_made()
        self.core.feed(p.encode_fields(p.WELCOME, hello.request, {p.IPC_VERSION: 1, p.MAX_PAYLOAD: 4096}))
        self.assertEqual(self.core.hello_answered(hello), "")

    def attach(self, sent_seq: int = 0, delivered_seq: int = 0) -> None:
        state = self.core.sessions.get(SESSION) or self.core.session_for(SESSION)
        self.core.sessions[SESSION] = state
        pending = self.core.attach_request(state)
        self.core.feed(opened(pending.request, sent_seq, delivered_seq))
        self.core.attach_answered(state, pending)

    def test_a_reply_an_error_a_loss_and_a_timeout(self) -> None:
        self.connect()
        replied, refused, unanswered = (self.core.request(p.PING) for _ in range(3))
        self.core.feed(p.encode(p.PONG, replied.request))
        self.core.feed(p.encode_fields(p.ERROR, refused.request, {p.CODE: 6, p.MESSAGE: "full"}))
        reply = self.core.outcome(replied)
        self.assertEqual(reply.op if reply is not None else None, p.PONG)
        with self.assertRaises(imagent.QueueFull):
            self.core.outcome(refused)
        with self.assertRaises(imagent.TimedOut):
            self.core.outcome(unanswered)
        self.assertEqual(self.core.pending, {})
        lost = self.core.request(p.PING)
        self.core.connection_lost("gone")
        self.assertIsNone(self.core.outcome(lost))

    def test_a_lost_send_is_settled_by_sent_seq(self) -> None:
        self.connect()
        self.attach(sent_seq=4)
        state = self.core.sessions[SESSION]
        first = SendInFlight(state, b"x", None)
        first.request(self.core)
        self.core.connection_lost("killed")
        self.connect()
        self.attach(sent_seq=4)
        self.assertIsNone(first.stored_seq())  # not stored: send it again
        self.core.connection_lost("killed")
        self.connect()
        self.attach(sent_seq=5)
        self.assertEqual(first.stored_seq(), 5)  # stored before the connection went

    def test_redelivered_messages_are_dropped_and_acks_sent_again(self) -> None:
        self.connect()
        self.attach()
        self.core.feed(message(1) + message(2))
        state = self.core.sessions[SESSION]
        taken = self.core.take_message(state)
        assert taken is not None
        taken.ack()
        self.assertEqual(self.acks, [(SESSION, 1)])
        self.assertIsNotNone(self.core.ack_frame(SESSION, 1))
        self.core.connection_lost("killed")
        self.connect()
        self.attach(delivered_seq=0)
        self.assertEqual(self.core.take_outgoing(), p.ack_frame(SESSION, 1))
        self.core.feed(message(1) + message(2) + message(3))
        self.assertEqual(self.core.redeliveries_dropped, 2)
        seqs = []
        while (queued := self.core.take_message(state)) is not None:
            seqs.append(queued.seq)
        self.assertEqual(seqs, [2, 3])

    def test_a_close_lost_with_its_connection_counts_when_the_next_says_closed(self) -> None:
        self.connect()
        release = Release(SESSION, p.CLOSE)
        self.core.connection_lost("killed")
        self.assertFalse(release.finished(self.core, release.request(self.core)))
        self.connect()
        pending = release.request(self.core)
        self.core.feed(p.encode_fields(p.ERROR, pending.request, {p.CODE: 11}))
        self.assertTrue(release.finished(self.core, pending))
        first = Release(SESSION, p.CLOSE)
        pending = first.request(self.core)
        self.core.feed(p.encode_fields(p.ERROR, pending.request, {p.CODE: 11}))
        with self.assertRaises(imagent.SessionClosed):
            first.finished(self.core, pending)

    def test_an_attach_refused_for_good_ends_the_session(self) -> None:
        self.connect()
        state = self.core.session_for(SESSION)
        pending = self.core.attach_request(state)
        self.core.feed(p.encode_fields(p.ERROR, pending.request, {p.CODE: 4}))
        with self.assertRaises(imagent.PermissionDenied):
            self.core.attach_answered(state, pending)
        self.assertIsInstance(state.error, imagent.PermissionDenied)

    def test_a_refused_hello_is_kept_for_connect(self) -> None:
        hello = self.core.connection_made()
        self.core.feed(p.encode_fields(p.ERROR, hello.request, {p.CODE: 12, p.MESSAGE: "too many"}))
        self.assertIn("LIMIT_REACHED", self.core.hello_answered(hello))
        self.assertIsInstance(self.core.unreachable("/x", "refused"), imagent.LimitReached)

    def test_a_session_opened_for_a_caller_that_gave_up_is_not_held(self) -> None:
        self.connect()
        pending = self.core.request(p.OPEN, p.open_records("echo", None, None))
        with self.assertRaises(imagent.TimedOut):
            self.core.outcome(pending)  # its caller gives up
        self.core.feed(opened(pending.request) + message(1))
        self.assertEqual(self.core.sessions, {})
        self.assertEqual(self.core.queued, 0)

    def test_a_request_above_the_frame_limit_is_refused_before_it_is_sent(self) -> None:
        self.connect()
        with self.assertRaises(imagent.PayloadTooLarge):
            self.core.request(p.OPEN, p.open_records("x" * (4096 + p.FRAME_OVERHEAD), None, None))
        self.assertEqual(self.core.pending, {})

    def test_request_ids_skip_those_still_awaiting_a_reply(self) -> None:
        self.connect()
        waiting = self.core.request(p.PING)
        self.core._next_request = waiting.request
        self.assertNotEqual(self.core.request(p.PING).request, waiting.request)

    def test_the_event_queue_is_bounded(self) -> None:
        self.connect()
        for _ in range(imagent.core.EVENT_QUEUE_LIMIT + 10):
            self.core.feed(p.encode_fields(p.EV_LINK_STATE, 0, {p.LINK_STATE: 2}))
        self.assertEqual(len(self.core.take_events()), imagent.core.EVENT_QUEUE_LIMIT)
        self.assertEqual(self.core.events_dropped, 10)


class HostileDaemonTests(unittest.TestCase):
    def test_deeply_nested_json_is_a_protocol_error(self) -> None:
        core = ClientCore(None)
        core.connection_made()
        with self.assertRaises(p.ProtocolError):
            core.feed(p.encode_fields(p.EV_EVENT, 0, {p.JSON: "[" * 200000}))

    def test_a_welcome_above_the_documented_max_payload_does_not_raise_the_frame_limit(self) -> None:
        core = ClientCore(None)
        hello = core.connection_made()
        core.feed(p.encode_fields(p.WELCOME, hello.request, {p.IPC_VERSION: 1, p.MAX_PAYLOAD: 0xFFFFFFFF}))
        core.hello_answered(hello)
        self.assertEqual(core.max_payload, p.MAX_PAYLOAD_CEILING)
        with self.assertRaises(p.ProtocolError):
            core.feed((p.MAX_PAYLOAD_CEILING + p.FRAME_OVERHEAD + 1).to_bytes(4, "big"))


if __name__ == "__main__":
    unittest.main()
