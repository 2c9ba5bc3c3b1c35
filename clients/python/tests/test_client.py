"""The blocking client against a fake daemon: requests, errors, and surviving the daemon."""

from __future__ import annotations

import os
import tempfile
import threading
import time
import unittest

from fakedaemon import FakeDaemon, wait_until

import imagent
from imagent import protocol as p


class ClientTestCase(unittest.TestCase):
    admin = False

    def setUp(self) -> None:
        self.directory = tempfile.TemporaryDirectory()
        self.daemon = FakeDaemon(self.directory.name, admin=self.admin)
        self.client = imagent.connect(self.daemon.path, "tests", timeout=5)

    def tearDown(self) -> None:
        self.client.close()
        self.daemon.close()
        self.directory.cleanup()


class RequestTests(ClientTestCase):
    def test_echo_round_trip_with_ack(self) -> None:
        session = self.client.open("echo")
        self.assertEqual(session.send(b"hello"), 1)
        message = session.receive(timeout=5)
        assert message is not None
        self.assertEqual((message.session, message.seq, message.payload), (session.id, 1, b"hello"))
        message.ack()
        self.assertTrue(wait_until(lambda: self.daemon.acks == [(session.id, 1)]))

    def test_receive_returns_none_when_the_timeout_passes(self) -> None:
        session = self.client.open("sink")
        start = time.monotonic()
        self.assertIsNone(session.receive(timeout=0.2))
        self.assertGreaterEqual(time.monotonic() - start, 0.19)

    def test_status_sessions_metrics_are_dicts(self) -> None:
        self.assertEqual(self.client.status()["link"]["state"], "connected")
        self.assertIsInstance(self.client.sessions(), dict)
        self.assertIsInstance(self.client.metrics(), dict)
        self.assertGreaterEqual(self.client.ping(), 0)

    def test_an_error_reply_raises_its_class(self) -> None:
        session = self.client.open("sink")
        self.daemon.fault(p.SEND, "error:6")
        with self.assertRaises(imagent.QueueFull) as raised:
            session.send(b"x")
        self.assertEqual(raised.exception.message, "injected")
        self.daemon.fault(p.SEND, "error:99")
        with self.assertRaises(imagent.IPCError) as unknown:
            session.send(b"x")
        self.assertEqual(unknown.exception.code, 99)
        self.assertEqual(session.send(b"x"), 1)  # the connection goes on

    def test_a_payload_above_max_payload_is_refused_before_sending(self) -> None:
        session = self.client.open("sink")
        with self.assertRaises(imagent.PayloadTooLarge):
            session.send(bytes(self.client.max_payload + 1))
        self.assertNotIn(p.SEND, self.daemon.requests)

    def test_a_request_without_reply_times_out(self) -> None:
        self.daemon.fault(p.STATUS, "silent")
        with self.assertRaises(imagent.TimedOut):
            self.client.status(timeout=0.2)
        self.assertEqual(self.client.status()["link"]["state"], "connected")

    def test_a_daemon_that_keeps_dropping_the_request_does_not_outlast_the_timeout(self) -> None:
        self.daemon.fault(p.STATUS, "drop")
        for _ in range(100000):  # each reconnect then dies before the request is written
            self.daemon.fault(p.HELLO, "answer-then-drop")
        start = time.monotonic()
        with self.assertRaises((imagent.DaemonUnavailable, imagent.TimedOut)):
            self.client.status(timeout=0.3)
        self.assertLess(time.monotonic() - start, 0.3 + 1.5)  # the grace of one handshake at most

    def test_attach_unknown_session(self) -> None:
        with self.assertRaises(imagent.UnknownSession):
            self.client.attach(12345)

    def test_session_closed_by_the_daemon_ends_receive(self) -> None:
        session = self.client.open("sink")
        self.daemon.push(session.id, p.encode(p.EV_SESSION_STATE, 0, p.u64(p.SESSION, session.id)
                                              + p.u8(p.SESSION_STATE, 4) + p.record(p.CODE, b"\x00\x0b")))
        with self.assertRaises(imagent.SessionClosed):
            session.receive(timeout=5)
        events = self.client.events()
        self.assertEqual([(type(e), getattr(e, "state", None)) for e in events], [(imagent.SessionStateEvent, 4)])

    def test_events_between_replies_are_kept_and_unknown_ops_skipped(self) -> None:
        session = self.client.open("sink")
        self.daemon.push(session.id, p.encode(p.EV_LINK_STATE, 0, p.u8(p.LINK_STATE, 0))
                         + p.encode(0x9ABC, 0, p.record(0x7777, b"new"))
                         + p.encode(p.EV_EXPIRED, 0, p.u64(p.SESSION, session.id) + p.u64(p.SEQ, 1)
                                    + p.record(p.CODE, b"\x00\x0d"))
                         + p.encode(p.EV_ACKED, 0, p.u64(p.SESSION, session.id) + p.u64(p.SEQ, 3)))
        self.assertEqual(self.client.status()["link"]["state"], "connected")
        events = self.client.events()
        self.assertEqual([type(event) for event in events],
                         [imagent.LinkStateEvent, imagent.ExpiredEvent, imagent.AckedEvent])
        expired = events[1]
        assert isinstance(expired, imagent.ExpiredEvent)
        self.assertIsInstance(expired.error, imagent.Expired)
        self.assertEqual((self.client.link_state, session.acked_seq), (0, 3))

    def test_next_event_waits_for_one(self) -> None:
        session = self.client.open("sink")
        self.assertIsNone(self.client.next_event(timeout=0.1))
        threading.Timer(0.1, lambda: self.daemon.push(session.id, p.encode(p.EV_LINK_STATE, 0, p.u8(p.LINK_STATE, 1)))).start()
        event = self.client.next_event(timeout=5)
        assert isinstance(event, imagent.LinkStateEvent)
        self.assertEqual(event.state_name, "connecting")

    def test_close_and_detach(self) -> None:
        kept = self.client.open("sink")
        gone = self.client.open("sink")
        kept.detach()
        gone.close()
        self.assertTrue(self.daemon.sessions[gone.id].closed)
        self.assertFalse(self.daemon.sessions[kept.id].closed)
        self.assertEqual(self.client.attach(kept.id).id, kept.id)
        with self.assertRaises(imagent.SessionClosed):
            self.client.attach(gone.id)

    def test_threads_share_one_client(self) -> None:
        sessions = [self.client.open("echo") for _ in range(4)]
        results: dict[int, list[bytes]] = {}

        def run(session: imagent.Session) -> None:
            got = []
            for i in range(50):
                session.send(b"%d" % i)
                message = session.receive(timeout=5)
                assert message is not None
                got.append(message.payload)
                message.ack()
            results[session.id] = got

        threads = [threading.Thread(target=run, args=(s,)) for s in sessions]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(10)
        self.assertEqual(sorted(results), sorted(s.id for s in sessions))
        for got in results.values():
            self.assertEqual(got, [b"%d" % i for i in range(50)])


class SurvivalTests(ClientTestCase):
    def test_a_send_stored_before_the_connection_dropped_returns_sent_seq(self) -> None:
        session = self.client.open("sink")
        self.assertEqual(session.send(b"one"), 1)
        self.daemon.fault(p.SEND, "drop-after-store")
        self.assertEqual(session.send(b"two"), 2)
        self.assertEqual(self.daemon.sessions[session.id].outbound, [b"one", b"two"])
        self.assertEqual(session.send(b"three"), 3)
        self.assertEqual(len(self.daemon.hellos), 2)

    def test_a_send_lost_before_it_was_stored_is_sent_again(self) -> None:
        session = self.client.open("sink")
        self.daemon.fault(p.SEND, "drop-before-store")
        self.assertEqual(session.send(b"one"), 1)
        self.assertEqual(self.daemon.sessions[session.id].outbound, [b"one"])

    def test_after_a_send_timed_out_the_next_send_knows_whether_it_was_stored(self) -> None:
        session = self.client.open("sink")
        self.daemon.fault(p.SEND, "store-silent")
        with self.assertRaises(imagent.TimedOut):
            session.send(b"one", timeout=0.3)
        self.assertEqual(session.send(b"two"), 2)
        self.daemon.fault(p.SEND, "silent")
        with self.assertRaises(imagent.TimedOut):
            session.send(b"lost", timeout=0.3)
        self.assertEqual(session.send(b"three"), 3)
        self.assertEqual(self.daemon.sessions[session.id].outbound, [b"one", b"two", b"three"])

    def test_a_send_waits_through_a_restart(self) -> None:
        session = self.client.open("sink")
        self.daemon.restart(down_for=0.5)
        self.assertEqual(session.send(b"after", timeout=5), 1)
        self.assertTrue(any(isinstance(e, imagent.ConnectionEvent) and e.connected for e in self.client.events()))

    def test_a_daemon_that_stays_away_raises_daemon_unavailable(self) -> None:
        session = self.client.open("sink")
        self.daemon.stop()
        start = time.monotonic()
        with self.assertRaises(imagent.DaemonUnavailable):
            session.send(b"x", timeout=0.5)
        self.assertLess(time.monotonic() - start, 1.5)
        with self.assertRaises(imagent.DaemonUnavailable):
            session.receive(timeout=0.3)

    def test_a_poll_without_time_left_still_reconnects(self) -> None:
        session = self.client.open("sink")
        self.daemon.restart()
        for _ in range(3):  # the first notices the loss, the next reconnects
            self.assertIsNone(session.receive(timeout=0))
        self.assertEqual(len(self.daemon.hellos), 2)

    def test_redelivered_messages_are_dropped_and_new_ones_come(self) -> None:
        session = self.client.open("sink")
        self.daemon.deliver(session.id, b"m1")
        first = session.receive(timeout=5)
        assert first is not None and first.seq == 1  # handed over, not acknowledged
        self.daemon.deliver(session.id, b"m2")
        self.assertTrue(wait_until(lambda: len(self.daemon.sessions[session.id].inbound) == 2))
        self.daemon.restart()  # redelivers 1 and 2 after the re-attach
        second = session.receive(timeout=5)
        assert second is not None
        self.assertEqual((second.seq, second.payload), (2, b"m2"))
        self.assertIsNone(session.receive(timeout=0.3))

    def test_an_ack_made_while_the_daemon_is_away_is_sent_after_the_reattach(self) -> None:
        session = self.client.open("sink")
        self.daemon.deliver(session.id, b"m1")
        message = session.receive(timeout=5)
        assert message is not None
        self.daemon.restart()
        message.ack()  # the connection is gone: kept for the re-attach (or sent if not noticed yet)
        self.assertIsNone(session.receive(timeout=0.3))
        self.assertTrue(wait_until(lambda: (session.id, 1) in self.daemon.acks))
        self.assertEqual(self.daemon.sessions[session.id].delivered, 1)

    def test_watch_is_asked_again_after_a_reconnect(self) -> None:
        self.client.watch()
        self.daemon.restart()
        self.client.ping()
        self.assertTrue(wait_until(lambda: self.daemon.requests.count(p.WATCH) == 2))

    def test_every_attached_session_is_reattached(self) -> None:
        sessions = [self.client.open("echo") for _ in range(3)]
        self.daemon.restart()
        for session in sessions:
            self.assertEqual(session.send(b"again"), 1)
            message = session.receive(timeout=5)
            assert message is not None
            self.assertEqual(message.payload, b"again")
        self.assertEqual(self.daemon.requests.count(p.OPEN), 6)


class AdminSocketTests(ClientTestCase):
    admin = True

    def test_the_admin_socket_is_tried_first(self) -> None:
        self.assertEqual(self.daemon.hellos, [self.daemon.path + ".admin"])

    def test_path_when_the_admin_socket_is_missing(self) -> None:
        os.unlink(self.daemon.path + ".admin")
        with imagent.connect(self.daemon.path) as client:
            client.ping()
        self.assertEqual(self.daemon.hellos[-1], self.daemon.path)


class SocketPathTests(unittest.TestCase):
    def test_the_order_of_imagent_ipc_7(self) -> None:
        saved = {k: os.environ.get(k) for k in ("IMAGENT_SOCKET", "XDG_RUNTIME_DIR")}
        try:
            with tempfile.TemporaryDirectory() as runtime:
                os.environ["IMAGENT_SOCKET"] = "/from/env"
                os.environ["XDG_RUNTIME_DIR"] = runtime
                self.assertEqual(imagent.resolve_socket("/explicit"), "/explicit")
                self.assertEqual(imagent.resolve_socket(), "/from/env")
                os.environ["IMAGENT_SOCKET"] = ""
                system = "/run/imagent/imagent.sock"
                if not os.path.exists(system):
                    self.assertEqual(imagent.resolve_socket(), system)  # neither exists
                    os.makedirs(os.path.join(runtime, "imagent"))
                    user = os.path.join(runtime, "imagent", "imagent.sock")
                    open(user, "w").close()
                    self.assertEqual(imagent.resolve_socket(), user)
        finally:
            for key, value in saved.items():
                if value is None:
                    os.environ.pop(key, None)
                else:
                    os.environ[key] = value

    def test_a_daemon_that_turns_the_connection_away_raises_its_error(self) -> None:
        with tempfile.TemporaryDirectory() as directory:
            daemon = FakeDaemon(directory)
            daemon.refuse_code = 12
            try:
                with self.assertRaises(imagent.LimitReached):
                    imagent.connect(daemon.path)
            finally:
                daemon.close()

    def test_no_daemon_raises_daemon_unavailable(self) -> None:
        with tempfile.TemporaryDirectory() as directory:
            with self.assertRaises(imagent.DaemonUnavailable):
                imagent.connect(os.path.join(directory, "none.sock"))


if __name__ == "__main__":
    unittest.main()
