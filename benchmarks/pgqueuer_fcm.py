"""The Python stack Herald is compared with: pgqueuer dequeues, firebase-admin sends.

Run inside benchmarks/.venv by benchmarks/compare:
  pgqueuer_fcm.py install DSN              install pgqueuer's schema (its own API)
  pgqueuer_fcm.py enqueue DSN N            enqueue N jobs with pgqueuer's enqueue (batches of 5,000)
  pgqueuer_fcm.py work DSN ACCOUNT FCM_BASE BATCH OUT
      work until the queue is drained; every pgqueuer batch (BATCH jobs) becomes one
      firebase-admin messaging.send_each_async call; writes counts, timings and the CPU of the
      run (after imports and set-up) as JSON to OUT.

HERALD_CA_FILE, as Herald reads it: a PEM file of the authorities that vouch for FCM_BASE's
certificate (the emulator's own, which benchmarks/compare passes on). firebase-admin builds its own
clients and takes no CA bundle in its API; each takes one from its environment, as documented by
its library: httpx (the sends, send_each_async) from SSL_CERT_FILE, requests (google-auth's token
refresh) from REQUESTS_CA_BUNDLE. Both are set to it before the app starts.
"""

import asyncio
import json
import os
import resource
import sys
import time
import warnings
from datetime import timedelta

import asyncpg
from pgqueuer.db import AsyncpgDriver
from pgqueuer.models import Job
from pgqueuer.qm import QueueManager
from pgqueuer.queries import Queries
from pgqueuer.types import QueueExecutionMode

warnings.filterwarnings("ignore", category=DeprecationWarning)

ENTRYPOINT = "fcm_send"


async def install(dsn):
    connection = await asyncpg.connect(dsn)
    try:
        await Queries(AsyncpgDriver(connection)).install()
    finally:
        await connection.close()


async def enqueue(dsn, count):
    connection = await asyncpg.connect(dsn)
    try:
        queries = Queries(AsyncpgDriver(connection))
        chunk = 5000
        for start in range(1, count + 1, chunk):
            n = min(chunk, count - start + 1)
            payloads = [f"bench-{g}".encode() for g in range(start, start + n)]
            await queries.enqueue([ENTRYPOINT] * n, payloads, [0] * n)
    finally:
        await connection.close()


class Batcher:
    """Collects the messages of the jobs pgqueuer runs together into one send_each_async call."""

    def __init__(self, messaging, size, linger=0.002):
        self.messaging = messaging
        self.size = size
        self.linger = linger
        self.pending = []
        self.timer = None
        self.inflight = set()

    async def send(self, message):
        future = asyncio.get_running_loop().create_future()
        self.pending.append((message, future))
        if len(self.pending) >= min(self.size, 500):
            self.flush()
        elif self.timer is None:
            self.timer = asyncio.get_running_loop().call_later(self.linger, self.flush)
        return await future

    def flush(self):
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        batch, self.pending = self.pending, []
        if batch:
            task = asyncio.ensure_future(self._send(batch))
            self.inflight.add(task)
            task.add_done_callback(self.inflight.discard)

    async def _send(self, batch):
        try:
            response = await self.messaging.send_each_async([m for m, _ in batch])
        except Exception as error:  # noqa: BLE001 - every job of the batch fails with it
            for _, future in batch:
                if not future.done():
                    future.set_exception(error)
            return
        for (_, future), result in zip(batch, response.responses):
            if future.done():
                continue
            if result.success:
                future.set_result(result.message_id)
            else:
                future.set_exception(result.exception)


async def work(dsn, account, fcm_base, batch_size, out):
    import firebase_admin
    from firebase_admin import credentials, messaging

    ca_file = os.environ.get("HERALD_CA_FILE")
    if ca_file:
        os.environ["SSL_CERT_FILE"] = ca_file
        os.environ["REQUESTS_CA_BUNDLE"] = ca_file
    # As Tests/Python/firebase_admin_check.py does: the account's token_uri already points at
    # the emulator; the send URL template is redirected to it.
    messaging._MessagingService.FCM_URL = fcm_base.rstrip("/") + "/v1/projects/{0}/messages:send"
    firebase_admin.initialize_app(credentials.Certificate(account))
    batcher = Batcher(messaging, batch_size)
    stats = {"sent": 0, "failed": 0, "first": None, "last": None}

    connection = await asyncpg.connect(dsn)
    qm = QueueManager(Queries(AsyncpgDriver(connection)))

    @qm.entrypoint(ENTRYPOINT)
    async def send(job: Job) -> None:
        now = time.time()
        if stats["first"] is None:
            stats["first"] = now
        token = job.payload.decode()
        message = messaging.Message(
            token=token,
            notification=messaging.Notification(title="Herald bench", body="Message " + token[6:]),
            data={"n": token[6:]})
        try:
            await batcher.send(message)
            stats["sent"] += 1
        except Exception:
            stats["failed"] += 1
            raise
        finally:
            stats["last"] = time.time()

    cpu_start = resource.getrusage(resource.RUSAGE_SELF)
    started = time.time()
    await qm.run(batch_size=batch_size, mode=QueueExecutionMode.drain,
                 dequeue_timeout=timedelta(seconds=0.5), max_concurrent_tasks=2 * batch_size)
    stats["run_seconds"] = time.time() - started
    cpu_end = resource.getrusage(resource.RUSAGE_SELF)
    stats["cpu_seconds"] = (cpu_end.ru_utime - cpu_start.ru_utime) + (cpu_end.ru_stime - cpu_start.ru_stime)
    await connection.close()
    with open(out, "w", encoding="utf-8") as f:
        json.dump(stats, f)


def main():
    command = sys.argv[1]
    if command == "install":
        asyncio.run(install(sys.argv[2]))
    elif command == "enqueue":
        asyncio.run(enqueue(sys.argv[2], int(sys.argv[3])))
    elif command == "work":
        asyncio.run(work(sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5]), sys.argv[6]))
    else:
        sys.exit(f"unknown command {command}")


if __name__ == "__main__":
    main()
