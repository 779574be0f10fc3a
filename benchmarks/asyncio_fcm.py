"""A hand-written asyncio sender: the strong Python peer Herald is compared with.

What a Python team that cares about throughput would write instead of an SDK: jobs in a table of
its own, claimed in batches through asyncpg with FOR UPDATE SKIP LOCKED, sent to the FCM HTTP v1
endpoint with httpx over HTTP/2 (prior knowledge on http://, ALPN on https://) on a few
connections, a bounded number of sends in flight, outcomes written back in batches.

Run inside benchmarks/.venv by benchmarks/compare:
  asyncio_fcm.py install DSN       create the table peer_jobs (dropped first if it exists)
  asyncio_fcm.py enqueue DSN N     N jobs, the same messages as herald bench's (one INSERT ... SELECT)
  asyncio_fcm.py work DSN ACCOUNT FCM_BASE BATCH IN_FLIGHT CONNECTIONS OUT
      claim BATCH jobs per statement, keep up to IN_FLIGHT sends going over CONNECTIONS HTTP/2
      connections, until no job is left; writes counts, timings and CPU as JSON to OUT.

HERALD_CA_FILE, as Herald reads it: a PEM file of the authorities that vouch for FCM_BASE's
certificate (the emulator's own, which benchmarks/compare passes on). httpx is given it as an
ssl.SSLContext (`verify=`), google-auth's token request as the `verify` of the requests session it
sends through (one that ignores the environment's CA variables); without it the system's
authorities are trusted, as for FCM itself.

Outcomes: 200 marks the job completed (finished_at, the message name FCM returned); 429 and 5xx
put it back as available after a second (run_at); any other answer marks it failed with the
error. The access token comes from the service account's token_uri through google-auth (a JWT
signed with the account's key, exchanged for a token), refreshed before it expires.
"""

import asyncio
import calendar
import json
import os
import resource
import ssl
import sys
import time

import asyncpg
import httpx
import requests
from google.auth.transport.requests import Request
from google.oauth2 import service_account

SCOPE = "https://www.googleapis.com/auth/firebase.messaging"

SCHEMA = """
DROP TABLE IF EXISTS peer_jobs;
CREATE TABLE peer_jobs (
    id            bigserial PRIMARY KEY,
    message       jsonb NOT NULL,
    state         text NOT NULL DEFAULT 'available',
    attempts      integer NOT NULL DEFAULT 0,
    run_at        timestamptz NOT NULL DEFAULT now(),
    created_at    timestamptz NOT NULL DEFAULT now(),
    started_at    timestamptz,
    finished_at   timestamptz,
    fcm_message_name text,
    last_error    text
);
CREATE INDEX peer_jobs_available ON peer_jobs (run_at, id) WHERE state = 'available';
"""

# The messages herald bench enqueues (Sources/Benchmark/BenchmarkQueries.swift), to tokens bench-<g>.
ENQUEUE = """
INSERT INTO peer_jobs (message)
SELECT jsonb_build_object(
           'token', 'bench-' || g,
           'notification', jsonb_build_object('title', 'Herald bench', 'body', 'Message ' || g),
           'data', jsonb_build_object('n', g::text))
FROM generate_series($1::bigint, $2::bigint) AS g
"""

CLAIM = """
UPDATE peer_jobs SET state = 'running', attempts = attempts + 1, started_at = now()
WHERE id IN (SELECT id FROM peer_jobs
             WHERE state = 'available' AND run_at <= now()
             ORDER BY run_at, id
             FOR UPDATE SKIP LOCKED
             LIMIT $1)
RETURNING id, message::text
"""

COMPLETE = """
UPDATE peer_jobs SET state = 'completed', finished_at = now(), fcm_message_name = o.name
FROM unnest($1::bigint[], $2::text[]) AS o(id, name)
WHERE peer_jobs.id = o.id
"""

RETRY = """
UPDATE peer_jobs SET state = 'available', run_at = now() + interval '1 second', last_error = o.error
FROM unnest($1::bigint[], $2::text[]) AS o(id, error)
WHERE peer_jobs.id = o.id
"""

FAIL = """
UPDATE peer_jobs SET state = 'failed', finished_at = now(), last_error = o.error
FROM unnest($1::bigint[], $2::text[]) AS o(id, error)
WHERE peer_jobs.id = o.id
"""

# Jobs neither finished nor failed: while any is waiting for a retry the queue is not drained.
PENDING = "SELECT count(*) FROM peer_jobs WHERE state IN ('available', 'running')"


async def install(dsn):
    connection = await asyncpg.connect(dsn)
    try:
        await connection.execute(SCHEMA)
    finally:
        await connection.close()


async def enqueue(dsn, count):
    connection = await asyncpg.connect(dsn)
    try:
        await connection.execute(ENQUEUE, 1, count)
    finally:
        await connection.close()


class AccessToken:
    """The OAuth2 access token of a service account, fetched again a minute before it expires."""

    def __init__(self, account_path, ca_file):
        self.credentials = service_account.Credentials.from_service_account_file(account_path, scopes=[SCOPE])
        # The token endpoint (the account's token_uri) is verified against ca_file, as the sends are.
        session = requests.Session()
        if ca_file:
            session.verify = ca_file
            # Else REQUESTS_CA_BUNDLE or CURL_CA_BUNDLE in the environment would win over the
            # session's verify (psf/requests issue 3829).
            session.trust_env = False
        self.request = Request(session=session)
        self.project_id = self.credentials.project_id
        self.lock = asyncio.Lock()
        self.header = None
        self.expires = 0.0

    async def authorization(self):
        if self.header is None or time.time() > self.expires - 60:
            async with self.lock:
                if self.header is None or time.time() > self.expires - 60:
                    # google-auth's refresh is blocking (requests): keep it off the event loop.
                    await asyncio.to_thread(self.credentials.refresh, self.request)
                    expiry = self.credentials.expiry  # naive, in UTC
                    self.expires = calendar.timegm(expiry.utctimetuple()) if expiry else time.time() + 3000
                    self.header = "Bearer " + self.credentials.token
        return self.header


class Recorder:
    """Collects outcomes and writes them in batches on a connection of its own."""

    def __init__(self, connection, batch):
        self.connection = connection
        self.batch = batch
        self.completed = ([], [])
        self.retry = ([], [])
        self.failed = ([], [])
        self.wakeup = asyncio.Event()
        self.closing = False
        self.lock = asyncio.Lock()  # one statement at a time on the connection

    def add(self, bucket, job_id, text):
        bucket[0].append(job_id)
        bucket[1].append(text)
        if len(bucket[0]) >= self.batch:
            self.wakeup.set()

    async def flush(self):
        async with self.lock:
            for sql, name in ((COMPLETE, "completed"), (RETRY, "retry"), (FAIL, "failed")):
                ids, texts = getattr(self, name)
                if ids:
                    setattr(self, name, ([], []))
                    await self.connection.execute(sql, ids, texts)

    async def run(self):
        while not self.closing:
            try:
                await asyncio.wait_for(self.wakeup.wait(), 0.005)
            except asyncio.TimeoutError:
                pass
            self.wakeup.clear()
            await self.flush()
        await self.flush()


async def work(dsn, account, fcm_base, batch, in_flight, connections, out):
    ca_file = os.environ.get("HERALD_CA_FILE") or None
    token = AccessToken(account, ca_file)
    url = f"{fcm_base.rstrip('/')}/v1/projects/{token.project_id}/messages:send"
    # One AsyncClient holds one HTTP/2 connection and multiplexes its requests on it; a few
    # clients, used in turn, spread the streams over a few connections.
    http2_only = url.startswith("http://")  # h2c needs prior knowledge; https negotiates h2 by ALPN
    # One context for every connection: the authorities are read once, as a long-running sender would.
    verify = ssl.create_default_context(cafile=ca_file) if ca_file else True
    clients = [httpx.AsyncClient(http1=not http2_only, http2=True, timeout=30, verify=verify,
                                 limits=httpx.Limits(max_connections=1, max_keepalive_connections=1))
               for _ in range(connections)]
    claimer = await asyncpg.connect(dsn)
    recorder = Recorder(await asyncpg.connect(dsn), batch)
    recording = asyncio.ensure_future(recorder.run())
    await token.authorization()

    stats = {"sent": 0, "retried": 0, "failed": 0, "first": None, "last": None}
    slots = asyncio.Semaphore(in_flight)
    tasks = set()
    turn = 0

    async def send(job_id, message, client):
        try:
            body = b'{"message":' + message.encode() + b"}"
            headers = {"authorization": await token.authorization(), "content-type": "application/json"}
            try:
                response = await client.post(url, content=body, headers=headers)
            except httpx.HTTPError as error:
                recorder.add(recorder.retry, job_id, f"{type(error).__name__}: {error}")
                stats["retried"] += 1
                return
            if response.status_code == 200:
                recorder.add(recorder.completed, job_id, response.json()["name"])
                stats["sent"] += 1
            elif response.status_code == 429 or response.status_code >= 500:
                recorder.add(recorder.retry, job_id, f"{response.status_code} {response.text[:200]}")
                stats["retried"] += 1
            else:
                recorder.add(recorder.failed, job_id, f"{response.status_code} {response.text[:200]}")
                stats["failed"] += 1
        finally:
            stats["last"] = time.time()
            slots.release()

    cpu_start = resource.getrusage(resource.RUSAGE_SELF)
    started = time.time()
    idle_since = None
    while True:
        # Claim only what can be sent at once: wait for a batch's worth of free slots.
        for _ in range(batch):
            await slots.acquire()
        rows = await claimer.fetch(CLAIM, batch)
        for _ in range(batch - len(rows)):
            slots.release()
        if rows:
            idle_since = None
            if stats["first"] is None:
                stats["first"] = time.time()
            for job_id, message in rows:
                task = asyncio.ensure_future(send(job_id, message, clients[turn]))
                turn = (turn + 1) % connections
                tasks.add(task)
                task.add_done_callback(tasks.discard)
            continue
        # Nothing to claim: done once nothing is in flight here and no job waits for a retry.
        for _ in range(batch):
            slots.release()
        if tasks:
            await asyncio.wait(set(tasks))
            continue
        await recorder.flush()
        if await claimer.fetchval(PENDING) == 0:
            break
        # Jobs still running elsewhere, or waiting for a retry: wait, but not for ever (a
        # process that died leaves its jobs running).
        idle_since = idle_since or time.time()
        if time.time() - idle_since > 60:
            sys.exit("asyncio_fcm: jobs left running or available for 60 s with none claimable; giving up")
        await asyncio.sleep(0.05)

    recorder.closing = True
    recorder.wakeup.set()
    await recording
    cpu_end = resource.getrusage(resource.RUSAGE_SELF)
    stats["run_seconds"] = time.time() - started
    stats["cpu_seconds"] = (cpu_end.ru_utime - cpu_start.ru_utime) + (cpu_end.ru_stime - cpu_start.ru_stime)
    for client in clients:
        await client.aclose()
    await claimer.close()
    await recorder.connection.close()
    with open(out, "w", encoding="utf-8") as f:
        json.dump(stats, f)


def main():
    command = sys.argv[1]
    if command == "install":
        asyncio.run(install(sys.argv[2]))
    elif command == "enqueue":
        asyncio.run(enqueue(sys.argv[2], int(sys.argv[3])))
    elif command == "work":
        dsn, account, fcm_base, batch, in_flight, connections, out = sys.argv[2:9]
        asyncio.run(work(dsn, account, fcm_base, int(batch), int(in_flight), int(connections), out))
    else:
        sys.exit(f"unknown command {command}")


if __name__ == "__main__":
    main()
