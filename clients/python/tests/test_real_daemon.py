"""Against a real imagentd in development mode (skipped when it is not built):
an echo stream that outlives a kill -9 of the daemon, on both APIs."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src"))

import imagent  # noqa: E402
import imagent.aio  # noqa: E402

REPO = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", ".."))
IMAGENTD = os.environ.get("IMAGENTD", os.path.join(REPO, ".build", "debug", "imagentd"))
MESSAGES, KILL_AT = 300, 100


@unittest.skipUnless(os.access(IMAGENTD, os.X_OK), f"{IMAGENTD} is not built")
class RealDaemonTests(unittest.TestCase):
    def setUp(self) -> None:
        self.directory = tempfile.TemporaryDirectory()
        self.socket = os.path.join(self.directory.name, "imagent.sock")
        self.daemon = self.start()

    def tearDown(self) -> None:
        self.daemon.kill()
        self.daemon.wait()
        self.directory.cleanup()

    def start(self) -> subprocess.Popen[bytes]:
        daemon = subprocess.Popen([IMAGENTD, "--dev", "--dev-dir", self.directory.name],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        end = time.monotonic() + 20
        while time.monotonic() < end:
            try:
                with imagent.connect(self.socket, timeout=2) as client:
                    if client.status()["link"]["state"] == "connected":
                        return daemon
            except imagent.Error:
                pass
            time.sleep(0.1)
        daemon.kill()
        raise AssertionError("imagentd --dev did not come up")

    def kill_and_restart(self) -> None:
        self.daemon.send_signal(signal.SIGKILL)
        self.daemon.wait()
        self.daemon = self.start()

    def check(self, seqs: list[int], payloads: list[bytes]) -> None:
        self.assertEqual(seqs, list(range(1, MESSAGES + 1)))
        self.assertEqual(payloads, [b"%d" % i for i in range(1, MESSAGES + 1)])

    def test_blocking_echo_stream_outlives_kill_9(self) -> None:
        seqs, payloads = [], []
        with imagent.connect(self.socket, timeout=30) as client:
            session = client.open("echo")
            for i in range(1, MESSAGES + 1):
                seqs.append(session.send(b"%d" % i))
                if i == KILL_AT:
                    self.kill_and_restart()
                while (message := session.receive(timeout=0 if i < MESSAGES else 10)) is not None:
                    payloads.append(message.payload)
                    message.ack()
                    if len(payloads) == MESSAGES:
                        break
        self.check(seqs, payloads)

    def test_asyncio_echo_stream_outlives_kill_9(self) -> None:
        async def run() -> tuple[list[int], list[bytes]]:
            seqs, payloads = [], []
            async with imagent.aio.connect(self.socket, timeout=30) as client:
                session = await client.open("echo")

                async def receive() -> None:
                    async for message in session:
                        payloads.append(message.payload)
                        message.ack()
                        if len(payloads) == MESSAGES:
                            return

                receiver = asyncio.create_task(receive())
                for i in range(1, MESSAGES + 1):
                    seqs.append(await session.send(b"%d" % i))
                    if i == KILL_AT:
                        await asyncio.to_thread(self.kill_and_restart)
                await asyncio.wait_for(receiver, 30)
            return seqs, payloads

        self.check(*asyncio.run(run()))


if __name__ == "__main__":
    unittest.main()
