"""The gateway: alk serves the model a worker talks to, over OpenAI's HTTP API.

One `Gateway` per run runs an asyncio loop in a thread of alk and holds what every session
shares (the cassette to replay, the one being recorded, the upstream's key); every attempt of
every repeat gets a `Session` (`alk.gateway.session`): its own token, its own listener, its
script position, its faults and its record of calls. With `network = "none"` the listener is
made inside the worker's network namespace by alk's init and handed to alk (`runner/init.py`);
this loop serves it from alk's side, so the worker reaches the gateway and nothing else.

HTTP itself is aiohttp's (its low-level server, and its client for the proxy); what goes on the
wire is `gateway.wire`'s; what the script says is `gateway.script`'s; the faults it injects are
`gateway.faults`'s, and forwarding to a provider is `gateway.proxy`'s.
"""

from __future__ import annotations

import asyncio
import os
import sys
import threading
from pathlib import Path
from typing import Any, Mapping

from aiohttp import ClientSession, ClientTimeout

from alk.errors import CassetteError
from alk.gateway import bounds
from alk.gateway import cassette as cassettes
from alk.redaction import Redactor
from alk.served_model import ModelSetup

# How long the proxy waits on the upstream before it is unavailable.
UPSTREAM_TIMEOUT_S = 120.0
# How long alk waits for its thread to start or to take a listener.
THREAD_WAIT_S = 5.0
# The gateway's port inside a worker's own network namespace, where every port is free.
NAMESPACE_PORT = 8011


class Gateway:
    """The run's gateway: a thread with an event loop, and what every session shares (the
    cassette to replay, the one being recorded, the upstream's key)."""

    def __init__(self, setup: ModelSetup, redactor: Redactor,
                 environ: Mapping[str, str] = os.environ) -> None:
        self.setup = setup
        self.redactor = redactor
        self._key = environ.get(setup.key_env, "") if setup.key_env else ""
        self.replayed = cassettes.Cassette.load(setup.cassette) \
            if setup.mode == "replay" and setup.cassette else None
        self.recorder = _recorder(setup.record, redactor) \
            if setup.mode == "proxy" and setup.record else None
        # What every session's connections, heads and bodies may hold at once, together.
        self.pool = bounds.run_pool()
        self._client: ClientSession | None = None
        self._loop = asyncio.new_event_loop()
        ready = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(ready,), name="alk-gateway",
                                        daemon=True)
        self._thread.start()
        ready.wait(THREAD_WAIT_S)

    def _run(self, ready: threading.Event) -> None:
        asyncio.set_event_loop(self._loop)
        self._loop.call_soon(ready.set)
        self._loop.run_forever()

    def call(self, coroutine: Any, wait_s: float = THREAD_WAIT_S) -> Any:
        """Runs a coroutine on the gateway's loop and waits for its result."""
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop).result(wait_s)

    async def client(self) -> ClientSession:
        if self._client is None:
            self._client = ClientSession(timeout=ClientTimeout(total=UPSTREAM_TIMEOUT_S))
        return self._client

    def close(self) -> None:
        """Stops the thread; writes the recorded cassette, if one was asked for and the run
        recorded a call."""
        if self._client is not None:
            try:
                self.call(self._client.close())
            except Exception:  # noqa: BLE001 - closing must not fail the run
                pass
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(THREAD_WAIT_S)
        if not self._thread.is_alive():
            self._loop.close()  # its selector and wake-up pipe: three files a gateway
        recorder = self.recorder
        if recorder is not None and (recorder.size or recorder.refused):
            recorder.close()
        elif recorder is not None:
            # No call (a run void before it started, say): an empty cassette would replace
            # the one recorded before, which people commit and replay.
            recorder.discard()
            kept = "the one recorded before is kept" if recorder.path.exists() else \
                "none was written"
            sys.stderr.write(f"warning: {recorder.path}: the run made no model call to "
                             f"record; {kept}\n")

    def __enter__(self) -> Gateway:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def upstream_key(self) -> str:
        return self._key


def _recorder(path: Path, redactor: Redactor) -> cassettes.CassetteWriter:
    """The writer of the cassette to record, its folder made first (`record =
    "cassettes/run.jsonl"` in a fresh checkout); CassetteError when alk cannot write there."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        return cassettes.CassetteWriter(path, redactor)
    except OSError as error:
        raise CassetteError(
            f"cannot record the cassette {path} ({error.strerror}: {error.filename}); make "
            f"{path.parent} a folder alk can write, or name a cassette in another") from None


def base_url(port: int) -> str:
    return f"http://127.0.0.1:{port}/v1"
