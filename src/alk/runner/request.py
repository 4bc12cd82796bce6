"""What the runner is asked to do: one worker process (`RunRequest`), the version gate it hands
the framework and version the worker reports to (`ReadyCheck`: the runner carries it, and
`alk.attribution.preflight.check_ready` judges), and the seam every runner fits (`Runner`: the
sandboxed `alk.runner.process.LocalRunner`, or a test's scripted one)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Mapping, Protocol

from alk.records import KillAt, Limits, Observation, Preflight
from alk.redaction import Redactor
from alk.runner.isolation import Filesystem, Isolation, Network
from alk.served_model import ModelSeen

if TYPE_CHECKING:
    from alk.transcript.writer import TranscriptWriter

LINE_LIMIT_BYTES = 1024 * 1024


class ModelLink(Protocol):
    """The gateway's session for this worker (`alk.gateway.session.Session`), as the runner
    uses it: serve a listener, open it to the scenario as start goes out, hand over what it
    recorded, say how many turns it served."""

    @property
    def wake_fd(self) -> int: ...

    def serve(self, listener: Any) -> None: ...

    def events(self) -> list[tuple[str, dict[str, Any]]]: ...

    def served_turns(self) -> int: ...

    def open(self) -> None: ...

    def close(self) -> ModelSeen: ...

    def release(self) -> None: ...


@dataclass(frozen=True, slots=True)
class RunRequest:
    """One worker process to run. `start` is None for a preflight-only probe. `redactor` holds
    the values that must not appear in what the runner reports (its transcript has its own)."""

    argv: tuple[str, ...]
    cwd: str
    env: Mapping[str, str]
    timeout_s: float
    hello: Mapping[str, Any]
    start: Mapping[str, Any] | None
    line_limit_bytes: int = LINE_LIMIT_BYTES
    redactor: Redactor = field(default_factory=Redactor)
    limits: Limits = field(default_factory=Limits)
    network: Network = Network.HOST
    filesystem: Filesystem = Filesystem.WORKSPACE
    kill_at: KillAt | None = None
    # Folders the worker must be able to read in a sandbox (its program, interpreter, the SDK).
    visible: tuple[str, ...] = ()
    # Folders inside `visible` that the worker must not see (alk's transcripts and reports):
    # an empty file system is mounted over them.
    hidden: tuple[str, ...] = ()
    # alk serves the model: the session, and the port its listener takes inside the worker's
    # network namespace (None: the session listens on alk's own loopback already).
    gateway: ModelLink | None = None
    gateway_port: int | None = None
    # The run's stop (alk.runner.stop): set, it ends this worker at once, from any thread.
    stop: Any = None
    # A warm start's prepared process (alk.runner.warm): the argv run in the sandbox before
    # the init, as root with the capability to mount the sandbox's /proc afresh.
    prepare: tuple[str, ...] = ()


# The version gate: judges a worker's framework_ready payload.
ReadyCheck = Callable[[Mapping[str, Any]], Preflight]


class Runner(Protocol):
    """Runs one worker process to its end: what the executor is given, and tests fake."""

    @property
    def isolation(self) -> Isolation:
        ...

    def run(self, request: RunRequest, gate: ReadyCheck,
            transcript: TranscriptWriter) -> Observation:
        ...
