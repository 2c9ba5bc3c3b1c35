"""The asyncio client against a fake daemon: the same shape and the same survival."""

from __future__ import annotations

import asyncio
import tempfile
import threading
import time
import unittest

from fakedaemon import FakeDaemon, wait_until

import imagent
import imagent.aio
from imagent import protocol as p


class AioTestCase(unittest.IsolatedAsyncioTestCase):
    async def asyncSetUp(self) -> None:
        self.directory = tempfile.TemporaryDirectory()
        self.daemon = FakeDaemon(self.directory.name)
        self.client = await imagent.aio.connect(self.daemon.path, "tests", timeout=5)

    async def asyncTearDown(self) -> None:
        await self.client.close()
        self.daemon.close()
        self.directory.cleanup()

    async def test_echo_round_trip_with_async_for(self) -> None:
        session = await self.client.open("echo")
        for i in range(3):
            self.assertEqual(await session.send(b"m%d" % i), i + 1)
        got = []
        async for message in session:
            got.append((message.seq, message.payload))
            message.ack()
            if len(got) == 3:
                break
        self.assertEqual(got, [(1, b"m0"), (2, b"m1"), (3, b"m2")])
        self.assertTrue(wait_until(lambda: self.daemon.sessions[session.id].delivered == 3))

    async def test_async_with_connects_and_closes(self) -> None:
        async with imagent.aio.connect(self.daemon.path) as client:
            self.assertEqual((await client.status())["link"]["state"], "connected")
            self.assertEqual(client.daemon_version, "fake")

    async def test_receive_returns_none_when_the_timeout_passes(self) -> None:
        session = await self.client.open("sink")
        self.assertIsNone(await session.receive(0.1))

    async def test_errors_raise_their_class(self) -> None:
        session = await self.client.open("sink")
        self.daemon.fault(p.SEND, "error:5")
        with self.assertRaises(imagent.SessionBusy):
            await session.send(b"x")
        self.daemon.fault(p.STATUS, "silent")
        with self.assertRaises(imagent.TimedOut):
            await self.client.status(timeout=0.1)
        with self.assertRaises(imagent.UnknownSession):
            await self.client.attach(999)

    async def test_a_daemon_that_keeps_dropping_the_request_does_not_outlast_the_timeout(self) -> None:
        self.daemon.fault(p.STATUS, "drop")
        for _ in range(100000):  # each reconnect then dies before the request is written
            self.daemon.fault(p.HELLO, "answer-then-drop")
        start = time.monotonic()
        with self.assertRaises((imagent.DaemonUnavailable, imagent.TimedOut)):
            await self.client.status(timeout=0.3)
        self.assertLess(time.monotonic() - start, 0.3 + 1.5)

    async def test_a_send_stored_before_the_connection_dropped_returns_sent_seq(self) -> None:
        session = await self.client.open("sink")
        await session.send(b"one")
        self.daemon.fault(p.SEND, "drop-after-store")
        self.assertEqual(await session.send(b"two"), 2)
        self.assertEqual(self.daemon.sessions[session.id].outbound, [b"one", b"two"])

    async def test_a_send_lost_before_it_was_stored_is_sent_again(self) -> None:
        session = await self.client.open("sink")
        self.daemon.fault(p.SEND, "drop-before-store")
        self.assertEqual(await session.send(b"one"), 1)
        self.assertEqual(self.daemon.sessions[session.id].outbound, [b"one"])

    async def test_after_a_send_timed_out_the_next_send_knows_whether_it_was_stored(self) -> None:
        session = await self.client.open("sink")
        self.daemon.fault(p.SEND, "store-silent")
        with self.assertRaises(imagent.TimedOut):
            await session.send(b"one", timeout=0.2)
        self.assertEqual(await session.send(b"two"), 2)
        self.assertEqual(self.daemon.sessions[session.id].outbound, [b"one", b"two"])

    async def test_a_send_waits_through_a_restart_and_messages_are_not_repeated(self) -> None:
        session = await self.client.open("echo")
        await session.send(b"one")
        first = await session.receive(5)
        assert first is not None  # handed over, not acknowledged: redelivered after the restart
        self.daemon.restart(down_for=0.3)
        self.assertEqual(await session.send(b"two", timeout=5), 2)
        second = await session.receive(5)
        assert second is not None
        self.assertEqual((second.seq, second.payload), (2, b"two"))
        self.assertIsNone(await session.receive(0.2))

    async def test_a_daemon_that_turns_the_connection_away_raises_its_error(self) -> None:
        self.daemon.refuse_code = 12
        with self.assertRaises(imagent.LimitReached):
            await imagent.aio.connect(self.daemon.path)

    async def test_a_daemon_that_stays_away_raises_daemon_unavailable(self) -> None:
        session = await self.client.open("sink")
        self.daemon.stop()
        with self.assertRaises(imagent.DaemonUnavailable):
            await session.send(b"x", timeout=0.3)

    async def test_many_sessions_at_once(self) -> None:
        async def one() -> bytes:
            session = await self.client.open("echo")
            await session.send(b"%d" % session.id)
            message = await session.receive(5)
            assert message is not None
            message.ack()
            return message.payload + b"/" + b"%d" % session.id

        results = await asyncio.gather(*(one() for _ in range(50)))
        for result in results:
            left, right = result.split(b"/")
            self.assertEqual(left, right)

    async def test_reading_pauses_while_nobody_waits_and_resumes_for_receive(self) -> None:
        self.client.max_queued = 5
        session = await self.client.open("sink")
        big = 64 * 1024  # 50 of them are far more than the socket buffers hold
        writer = threading.Thread(target=lambda: [self.daemon.deliver(session.id, b"%d" % i * big) for i in range(50)])
        writer.start()
        await asyncio.sleep(0.5)
        self.assertLess(self.client._core.queued, 20)  # the rest waits in the daemon
        for i in range(50):
            message = await session.receive(5)
            assert message is not None
            self.assertEqual(message.payload, b"%d" % i * big)
        writer.join(5)

if __name__ == "__main__":
    unittest.main()
