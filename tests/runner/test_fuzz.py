"""Protocol fuzzing: whatever bytes a worker writes, alk attributes the repeat and never fails.

Generated lines go through the real runner, in real worker processes under the machine's own
isolation (tests/workers/replay.py writes them on its protocol stream and on stderr), and, many
more of them, through the pure stages alone: line splitting, `decode_line`, `ProtocolState`, the
transcript and attribution. For every example:

- nothing raises, and the repeat gets exactly one cause, from the catalogue, with its outcome;
- nothing a worker shapes is alk's own failure (`lane_infra`/`harness_error`);
- the transcript reads back with a strict JSON parser (no NaN, no Infinity, no number too large
  for a float), every line ASCII, `seq` strictly increasing, no event nested deeper than the
  protocol allows, no payload dropped as unrecordable;
- what alk keeps (the stderr tail, violation details, names, steps) is bounded, and the lane's
  secret is in none of it.

The lines are what a hostile or broken worker could write: deep nesting around alk's bound (100
levels) and Python's recursion limit (~1,000), wide objects and arrays, huge integers (past
Python's 4,300 digits too), 1e999, NaN and Infinity literals, lone surrogates as escapes, bidi and
C1 characters, NUL, emoji, invalid UTF-8, non-JSON and non-object JSON, every field of the
protocol with the wrong type, names and strings up to 200 KB, forged `harness` events, odd
`framework_ready` payloads, duplicate results, blank lines and a last line without a newline.
`CLASSICS`, one line of each kind, runs first every time.
"""

from __future__ import annotations

import base64
import contextlib
import functools
import json
import math
import os
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

import hypothesis
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

import alk
from alk.attribution import expectation
from alk.attribution.outcome import attribute
from alk.attribution.preflight import MAX_IDENTITY_CHARS, check_ready
from alk.causes import CATALOGUE, Cause
from alk.cleanup import remove_tree
from alk.records import (
    Attribution,
    Expectations,
    FileExpectation,
    KillAt,
    Lane,
    Observation,
    Preflight,
    Violation,
)
from alk.redaction import Redactor
from alk.runner.lines import LineSplitter
from alk.runner.process import LocalRunner
from alk.runner.protocol import (
    MAX_NAME_CHARS,
    MAX_PATH_CHARS,
    MAX_TOOL_NAMES,
    MAX_TRAJECTORY_CHARS,
    MAX_VIOLATIONS_KEPT,
    Phase,
    ProtocolState,
    decode_line,
    hello_message,
)
from alk.runner.request import LINE_LIMIT_BYTES, RunRequest
from alk.runner.sandbox import visible_paths
from alk.runner.stderr import TAIL_CHARS, StderrSink
from alk.transcript.reader import read_transcript
from alk.transcript.writer import TranscriptWriter

SRC = Path(alk.__file__).resolve().parent.parent
WORKERS = Path(__file__).resolve().parents[1] / "workers"
REPLAY = WORKERS / "replay.py"

# Examples of 5-40 lines: about 2,000 lines through real workers (a process each, ~100 ms with
# the sandbox) and 3,500 through the pure stages, where generating them is most of the cost;
# 10-15 s each on two idle cores.
PROCESS_EXAMPLES = 80
PURE_EXAMPLES = 150
# Examples are large by design (lines up to 200 KB, nesting up to 1,200 levels).
SLOW_DATA = [HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.large_base_example]

SECRET = "fz-Secret-4Qx9Lm"
REDACTOR = Redactor([SECRET])
LANE = Lane(name="fuzz", description="", framework="fuzz", requirement=">=1.0,<2",
            command=(sys.executable, str(REPLAY)), required_env=(), timeout_s=30.0, repeats=1,
            scenarios=(), path=WORKERS / "fuzz.toml", root=WORKERS,
            transcript_cap_bytes=64 * 1024 * 1024)
GATE = functools.partial(check_ready, LANE, redactor=REDACTOR)
EXPECT = Expectations(
    stop_reason="accepted", output_contains="done", output_matches=r"d.ne", output_equals="done",
    end_state={"phase": "stopped", "n": [1, {"a": None}]},
    tool_calls={"lookup": 1, "\u202e": 0, "n" * 140: 1},
    files=(FileExpectation("out.json", json_length=1, json_subset=[{"phase": "stopped"}]),))
START = {"type": "start", "run_id": "fuzz", "scenario": {"id": "s", "task": "t", "input": {}},
         "repeat": 1, "seed": 1}

# Python's own, which alk runs under. Hypothesis raises it while a test runs (by some 2,000
# frames): each example runs under this one again, or a value nested deep enough to exhaust it
# inside alk would pass here.
RECURSION_LIMIT = sys.getrecursionlimit()
# docs/protocol.md: a line nested deeper than this (the event counting as one) is `too_deep`.
# A worker's event sits as deep in the transcript as on its line; a check event holds a
# workspace file's JSON (read within the same bound) two levels down.
PROTOCOL_DEPTH = 100
CHECK_DEPTH = PROTOCOL_DEPTH + 2
# The transcript writer's last resort, for a payload it cannot encode.
UNRECORDABLE = {"dropped": "payload not recordable as strict JSON"}
# Bounds on what alk keeps. A violation's detail quotes at most 200 characters of a line, as
# Python's repr (up to 10 characters each); attribution adds a stderr line and a few words.
VIOLATION_DETAIL_CHARS = 2 * 1024 + 256
ATTRIBUTION_DETAIL_CHARS = 8 * 1024
STEP_CHARS = 2 * MAX_NAME_CHARS + 64


# --- JSON text, as a worker may spell it -----------------------------------------------------


class Raw(str):
    """JSON text written as it is: a number or an escape that `json.dumps` would not write."""


class Obj(tuple):
    """A JSON object as (key, value) pairs, in order: a key may come twice."""


MISSING = object()  # a field left out of its object


def dump(value: Any, ascii_only: bool = True) -> str:
    if isinstance(value, Raw):
        return str(value)
    if isinstance(value, Obj):
        return "{" + ",".join(f"{dump(k, ascii_only)}:{dump(v, ascii_only)}"
                              for k, v in value if v is not MISSING) + "}"
    if isinstance(value, list):
        return "[" + ",".join(dump(v, ascii_only) for v in value) + "]"
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=ascii_only)
    return json.dumps(value)


def mix(*choices: tuple[int, st.SearchStrategy]) -> st.SearchStrategy:
    """One of the strategies, each about as often as its weight. (`st.one_of` would not do: it
    takes a strategy given twice as one branch, chooses among the branches of a `one_of` inside
    it as among its own, and favours some branches over others.)"""
    branches = [strategy for weight, strategy in choices for _ in range(weight)]
    return st.sampled_from(range(len(branches))).flatmap(branches.__getitem__)


def either(*strategies: st.SearchStrategy) -> st.SearchStrategy:
    """One of the strategies, each as often as the others."""
    return mix(*((1, strategy) for strategy in strategies))


def weighted(common: st.SearchStrategy, odd: st.SearchStrategy, times: int = 3
             ) -> st.SearchStrategy:
    """`common` about `times` times as often as `odd`."""
    return mix((times, common), (1, odd))


ODD_CHARS = ["\u202e", "\u2066", "\u200f", "\u061c", "\x85", "\x9b", "\x1b[31m", "\x00", "\x7f",
             "\U0001f600", "\U0001f469\u200d\U0001f469\u200d\U0001f467", "\ufeff", "\u2028",
             "\U000e0001", "\ufffd", "\uffff", "\U0010ffff", "é", "ß", "\t", "\n", "\r", '"',
             "\\", "/", "'", SECRET]
# Spelled inside a JSON string as they are: lone surrogates, NUL, bidi (valid JSON all), and,
# for the hostile lines only, broken escapes and raw control characters.
ESCAPES = ["\\ud800", "\\udfff", "\\udc00\\ud800", "\\ud83d\\ude00", "\\ud83d", "\\u0000",
           "\\u202e", "\\u0085", "\\u009b", "\\uffff", "\\ufeff", "\\/", '\\"', "\\\\",
           "fz-Secr\\u0065t-4Qx9Lm"]
BROKEN_ESCAPES = ["\\u00", "\\x41", "\\", "\x00", "\x1f", "\\ud80g"]
LONG_UNITS = ["a", "é", "\U0001f600", "\u202e", "\\u202e", "\\ud800", "\\u0000", '\\"', SECRET,
              "\x85"]
# Around the bounds on names (128) and excerpts (200, 2,000), up to ~200 KB a line.
LONG_SIZES = either(st.sampled_from([127, 128, 129, 130, 199, 200, 201, 1999, 2000, 2001]),
                    st.sampled_from([4096, 65_536, 199_999, 200_000]),
                    st.integers(0, 8192))
FINITE_NUMBERS = ["0", "-0", "1", "-1", "0.0", "-0.0", "1e-400", "-1e-999", "5e-324", "1E2",
                  "1.7976931348623157e308", "2147483647", "2147483648", "-2147483649",
                  "9007199254740993", "4.0", "9" * 4300, "-" + "1" * 4300]
# JSON has no NaN or Infinity; the others are too large for a float, or not JSON numbers.
BAD_NUMBERS = ["1e999", "-1e400", "1E400", "1.8e308", "-1.8e308", "NaN", "-NaN", "Infinity",
               "-Infinity", "+Infinity", "nan", "inf", "+1", "01", "-01", ".5", "1.", "1e",
               "0x10", "1_000", "9" * 4301, "-" + "1" * 5000, "1" * 4400 + ".5"]
# Around alk's bound (100, the event's own levels included) and Python's recursion limit.
DEPTHS = either(st.sampled_from([98, 99, 100, 101, 102, 103, 500, 995, 996, 997, 998, 999,
                                 1000, 1001, 1002, 1100, 1200]),
                st.integers(1, 1200))
KEYS = ["a", "k", "name", "output", "channel", "type", "payload", "id", "x_id", "ts", SECRET, ""]


def _render(parts: list[tuple[str, str]], ascii_only: bool) -> Raw:
    return Raw('"' + "".join(json.dumps(text, ensure_ascii=ascii_only)[1:-1] if kind == "text"
                             else text for kind, text in parts) + '"')


WORDS = ["done", "lookup", "accepted", "stopped", "phase", "a", "", " ", "x" * 40, "naïve",
         "日本語", "Ωμέγα", "<script>", "%s%n", "${HOME}", "../../etc/passwd", "null", "NaN"]


def string(escapes: list[str]) -> st.SearchStrategy:
    """A JSON string of words, any text, odd characters and escapes spelled as they are."""
    fragment = either(st.sampled_from(WORDS).map(lambda s: ("text", s)),
                      st.text(max_size=8).map(lambda s: ("text", s)),
                      st.sampled_from(ODD_CHARS).map(lambda s: ("text", s)),
                      st.sampled_from(escapes).map(lambda s: ("raw", s)))
    return st.builds(_render, st.lists(fragment, max_size=4), st.booleans())


@st.composite
def long_string(draw: st.DrawFn) -> Raw:
    """Up to ~200 KB of one repeated unit (escapes included: they decode shorter)."""
    unit = draw(st.sampled_from(LONG_UNITS))
    size = draw(LONG_SIZES)
    return Raw('"' + unit * max(1, size // len(unit.encode())) + '"')


HUGE_SHAPES = {"int": lambda n: "9" * n, "negative": lambda n: "-" + "1" * n,
               "fraction": lambda n: "0." + "3" * n, "big_float": lambda n: "1" * n + ".5",
               "exponent": lambda n: "1e" + "9" * min(n, 40)}


def huge_number(valid: bool) -> st.SearchStrategy:
    """Up to 4,300 digits Python reads an integer; past that, json.loads refuses it (and a
    float that long is infinite)."""
    digits = either(st.sampled_from([4299, 4300] + ([] if valid else [4301, 6000])),
                    st.integers(1000, 4300 if valid else 6000))
    shapes = ["int", "negative", "fraction"] + ([] if valid else ["big_float", "exponent"])
    return st.builds(lambda shape, n: Raw(HUGE_SHAPES[shape](n)), st.sampled_from(shapes),
                     digits)


@st.composite
def _deep(draw: st.DrawFn, leaf: st.SearchStrategy, depths: st.SearchStrategy,
          valid: bool) -> Raw:
    depth = draw(depths)
    kind = draw(st.sampled_from(["array", "object", "mixed"]))
    inner = dump(draw(leaf))
    if kind == "array":
        opening, closing = "[" * depth, "]" * depth
    elif kind == "object":
        opening, closing = '{"k":' * depth, "}" * depth
    else:
        opening, closing = '[{"k":' * (depth // 2), "}]" * (depth // 2)
    if not valid and draw(st.integers(0, 5)) == 0:  # unbalanced
        closing = closing[:len(closing) // 2]
    return Raw(opening + inner + closing)


WIDE_SHAPES = {"array": lambda n: "[" + ",".join(["0"] * n) + "]",
               "object": lambda n: "{" + ",".join(f'"k{i}":{i}' for i in range(n)) + "}",
               "same_key": lambda n: "{" + ",".join(['"a":[]'] * n) + "}",
               "empties": lambda n: "[" + ",".join(["{}", "[]"] * (n // 2)) + "]"}
wide = st.builds(lambda shape, n: Raw(WIDE_SHAPES[shape](n)), st.sampled_from(sorted(WIDE_SHAPES)),
                 either(st.sampled_from([0, 1, 100, 1000, 10_000, 20_000]),
                        st.integers(0, 2000)))


class Values:
    """Strategies for JSON values as a worker may spell them. `valid`: only what JSON and alk's
    bounds allow (so that the line is an event and reaches the stages after decoding); else
    anything, non-finite numbers, broken escapes and nesting past every bound included."""

    def __init__(self, valid: bool) -> None:
        self.string = string(ESCAPES if valid else ESCAPES + BROKEN_ESCAPES)
        self.number = either(
            st.integers().map(str), st.floats(allow_nan=False, allow_infinity=False).map(repr),
            st.sampled_from(FINITE_NUMBERS if valid else FINITE_NUMBERS + BAD_NUMBERS),
            *([] if valid else [st.sampled_from(BAD_NUMBERS)])).map(Raw)
        self.leaf = mix((1, st.none()), (1, st.booleans()), (1, self.number),
                        (1, huge_number(valid)), (2, self.string))
        self.key = weighted(st.sampled_from(KEYS), self.string, 2)
        self.tree = st.recursive(self.leaf, lambda kids: either(
            st.lists(kids, max_size=4), st.lists(st.tuples(self.key, kids), max_size=4).map(Obj)),
            max_leaves=6)
        # Well-formed lines nest up to the bound and, now and then, just past it (the event
        # and its payload add two or three levels to these).
        depths = either(st.integers(1, 97), st.sampled_from([96, 97, 98, 99])) if valid \
            else DEPTHS
        # Rare: each is large, and several in one example are larger still.
        self.big = either(_deep(self.leaf, depths, valid), wide, long_string())
        self.any = mix((5, self.tree), (2, self.leaf), (1, self.big))


HOSTILE = Values(valid=False)
WELL_FORMED = Values(valid=True)
value = HOSTILE.any

# Names around alk's bound on them (128 characters), and far past it (up to 200 KB).
long_name = st.builds(lambda n, c: c * (n if n <= 1000 else n // len(c.encode())),
                      st.sampled_from([127, 128, 129, 1000, 200_000]),
                      st.sampled_from(["n", "é", "\U0001f600", "\u202e"]))
NAMES = ["lookup", "echo", "lookup", "", "\u202elookup", "look\x00up", SECRET, "n" * 140]
path_text = st.sampled_from(["/opt/fw/pkg", "/opt/fw/pkg/", "/opt/fw/pkg/mod.py",
                             "/opt/fw/pkg/../w.py", "/usr/lib/python3.11/json/decoder.py",
                             "/venv/lib/python3.11/site-packages/x/y.py", "<frozen importlib>",
                             "relative.py", "/", "", "/w/worker.py", "\u202e/opt/fw", '/a"b.py',
                             "/opt/fw/pkg\x00", "//opt//fw//pkg"])
version = either(
    st.sampled_from(["1.0", "1.0", "1.5", "2.0", "0.9", "", "v1.0", "1!1.0", "1.0rc1",
                     "1.0.post1.dev2+local.x", "\uff11.\uff10", "1.0\u202e", "1.0\x00", " 1.0 ",
                     "1.0\n", "1.0" + SECRET]),
    st.sampled_from([60, 62, 63, 64, 65, 1000]).map(lambda n: "1." + ".".join(["0"] * n)),
    HOSTILE.string, long_name, value)
GOOD_END_STATE = Obj([("phase", "stopped"), ("n", [1, Obj([("a", None)])])])


def fields(values: Values, strict: bool) -> dict[str, st.SearchStrategy]:
    """Payload fields: mostly of the right type, else anything; `strict`: a string always
    where a violation would follow (a tool's name)."""
    other = values.any
    name = weighted(st.sampled_from(NAMES), either(values.string, long_name), 2)
    return {
        "name": name if strict else weighted(name, other, 4),
        "ok": st.sampled_from([True, True, False, "true", 1, 0, None, [], MISSING]),
        "args": weighted(st.just(Obj([("order", 742)])), other, 1),
        "output": weighted(st.sampled_from(["done", "done", "", "d\u202ene", SECRET + " done"]),
                           either(values.string, long_string(), other), 2),
        "error": other,
        "point": weighted(name, other, 4),
        "occurrence": either(st.sampled_from([1, 1, 2, 0, -1, 2**31 - 1, 2**31, True, 1.0,
                                              "1", None]), values.number),
        "turn": either(st.sampled_from([2, 3, 1, 0, -1, 2**31 - 1, 2**31, True, 2.0, "2",
                                        None]), values.number),
        "script_turns": either(st.sampled_from([1, 0, 2, -1, 2**31, True, None]),
                               values.number),
        "stop_reason": weighted(st.just("accepted"), either(name, other), 2),
        "end_state": weighted(st.just(GOOD_END_STATE), either(other, st.just(MISSING)), 2),
        "verification": other,
        "framework": weighted(st.just("fuzz"), either(
            st.sampled_from(["Fuzz", "fuzz ", "", SECRET]), values.string, long_name, other), 2),
        "framework_version": version,
        "package_paths": weighted(st.lists(path_text, max_size=5), either(
            st.integers(0, 1000).map(lambda n: ["/opt/fw/pkg"] * n),
            st.lists(either(other, long_name), max_size=3), other), 2),
        "id": other, "ts": other, "run_id": other, "call_id": other, "deadline_s": other,
        SECRET: other,
    }


# (channel, type, the payload fields that shape is about)
SHAPES = [
    ("tool", "call", ("name", "args", "id")),
    ("tool", "result", ("name", "ok", "output", "error", "call_id")),
    ("tool", "result", ("name", "ok", "output")),
    ("agent", "result", ("output", "stop_reason", "end_state", "verification")),
    ("agent", "result", ("output", "stop_reason", "end_state")),
    ("framework", "fault", ("point", "occurrence", "error")),
    ("model", "turn", ("output", "ts")),
    ("model", "script_exhausted", ("turn", "script_turns")),
    ("agent", "step", ("name", "args", "run_id")),
    ("user", "message", ("output",)),
]
READY_SHAPE = ("framework", "framework_ready", ("framework", "framework_version",
                                                "package_paths"))
FORGED_SHAPES = [("harness", "exit", ("name", "ok", "deadline_s")),
                 ("harness", "attribution", ("output", "verification"))]
RESULT_SHAPES = [shape for shape in SHAPES if shape[:2] == ("agent", "result")]
OTHER_SHAPES = [shape for shape in SHAPES if shape not in RESULT_SHAPES]
CHANNELS = either(
    st.sampled_from(["agent", "tool", "model", "user", "framework"]),
    st.sampled_from(["harness", "Harness", "HARNESS", " agent", "agent ", "", "stderr",
                     "tool\x00", "\u202eagent", SECRET]),
    st.just(MISSING), long_name, value)
TYPES = either(
    st.sampled_from(["call", "result", "framework_ready", "fault", "turn", "step", "after_kill",
                     "violation", "", " ", "result\x00", "n" * 128, "n" * 129, SECRET]),
    st.just(MISSING), HOSTILE.string, long_name, value)
WELL_FORMED_TYPES = st.sampled_from(["x", "\u202e", "n" * 128, SECRET, "step\x00", "\U0001f600"])
PAYLOADS = either(st.just(MISSING), st.none(), st.just([]), HOSTILE.string, HOSTILE.number,
                  value, HOSTILE.big)
EXTRA_PAIRS = st.lists(st.tuples(HOSTILE.key, either(CHANNELS, value)), max_size=2)
ORDERS = {n: st.permutations(list(range(n))) for n in range(3, 6)}


class Events:
    """Lines shaped like events: `hostile`, any part of them possibly wrong; else events of
    protocol v1 (after start), their values as odd as JSON and alk's bounds let them be, which
    reach the stages past decoding, the result's checks included."""

    def __init__(self, values: Values, hostile: bool) -> None:
        self.hostile = hostile
        self.fields = fields(values, strict=not hostile)
        names = sorted(self.fields) if hostile else sorted(
            set(self.fields) - {"framework", "framework_version", "package_paths"})
        self.extra = st.lists(st.sampled_from(names), max_size=2)

    @st.composite
    def _line(draw: st.DrawFn, self: Events, shapes: tuple) -> bytes:
        channel, type, names = draw(st.sampled_from(shapes))
        if self.hostile:
            if not draw(st.integers(0, 4)):
                channel = draw(CHANNELS)
            if not draw(st.integers(0, 4)):
                type = draw(TYPES)
        elif not draw(st.integers(0, 6)):
            type = draw(WELL_FORMED_TYPES)
        if not self.hostile or draw(st.integers(0, 7)):
            chosen = [f for f in names if draw(st.integers(0, 5))
                      or (f in ("name", "output", "stop_reason") and not self.hostile)]
            payload: Any = Obj([(f, draw(self.fields[f])) for f in chosen + draw(self.extra)])
        else:
            payload = draw(PAYLOADS)
        pairs = [("channel", channel), ("type", type), ("payload", payload)]
        if self.hostile:
            pairs += draw(EXTRA_PAIRS)  # a key may come twice
        order = draw(ORDERS[len(pairs)])
        return dump(Obj(pairs[i] for i in order), draw(st.booleans())).encode("utf-8")

    def lines(self, shapes: list) -> st.SearchStrategy:
        return Events._line(self, tuple(shapes))


HOSTILE_EVENTS = Events(HOSTILE, hostile=True)
WELL_FORMED_EVENTS = Events(WELL_FORMED, hostile=False)
event_line = HOSTILE_EVENTS.lines(SHAPES + [READY_SHAPE] + FORGED_SHAPES)
ready_line = HOSTILE_EVENTS.lines([READY_SHAPE])
well_formed_line = WELL_FORMED_EVENTS.lines(OTHER_SHAPES)
well_formed_result = WELL_FORMED_EVENTS.lines(RESULT_SHAPES)

BAD_UTF8 = [b"\xff", b"\xfe", b"\x80", b"\xc0\x80", b"\xc3", b"\xe2\x82", b"\xed\xa0\x80",
            b"\xed\xbf\xbf", b"\xf4\x90\x80\x80", b"\xf8\x88\x80\x80\x80", b"\xef\xbb\xbf"]
NON_JSON = [b"", b" ", b"\t", b"\r", b"\x00", b"{", b"}", b"[", b"{}}", b"{\"channel\":\"agent\",}",
            b"{'channel': 'agent', 'type': 'x'}", b"None", b"True", b"undefined", b"NaN",
            b"Infinity", b"-Infinity", b"1e999", b"\xef\xbb\xbf{}", b"{} {}", b"//{}",
            b'{"channel":"agent","type":"x"}garbage', b'{"channel":"agent","type":"x"} \x00']
broken_utf8 = st.builds(lambda line, at, bad: line[:at % (len(line) + 1)] + bad
                        + line[at % (len(line) + 1):],
                        event_line, st.integers(0, 1 << 20), st.sampled_from(BAD_UTF8))
truncated = st.builds(lambda line, at: line[:at % (len(line) + 1)], event_line,
                      st.integers(0, 1 << 20))
stdout_line = mix(
    (8, event_line), (1, ready_line), (1, st.sampled_from(NON_JSON)),
    (1, st.binary(max_size=64)), (1, st.text(max_size=40).map(str.encode)),
    (1, value.map(lambda v: dump(v).encode())),  # JSON, mostly not an object
    (1, broken_utf8), (1, truncated),
)

EXCEPTION_LINES = ["ValueError: x", "KeyError", "not an exception line", "",
                   "RuntimeError: " + SECRET, "a.b.C: \u202e\x85", "MemoryError",
                   "OSError: [Errno 24] Too many open files",
                   "ModuleNotFoundError: No module named 'fuzz'"]
traceback = st.builds(
    lambda frames, last: ("Traceback (most recent call last):\n" + "".join(
        f'  File "{path}", line {line}, in f\n    x()\n' for path, line in frames)
        + last).encode("utf-8"),
    st.lists(st.tuples(path_text, st.integers(0, 10**6)), min_size=1, max_size=4),
    st.sampled_from(EXCEPTION_LINES))
long_stderr = st.builds(lambda unit, size: unit * max(1, size // len(unit)),
                        st.sampled_from([b"e", "\u202e".encode(), "\U0001f600".encode(), b"\xff",
                                         SECRET.encode(), b"\x00"]), LONG_SIZES)
stderr_line = either(
    st.text(max_size=80).map(str.encode), st.binary(max_size=80),
    st.lists(st.sampled_from(ODD_CHARS), max_size=8).map(lambda c: "".join(c).encode()),
    traceback, long_stderr, stdout_line,
    st.sampled_from([b"", b"\r", SECRET.encode(), SECRET[:7].encode(), b"\xff\xfe",
                     b"Traceback (most recent call last):"]),
)


# --- a worker's session ----------------------------------------------------------------------


@dataclass(frozen=True)
class Session:
    """What one worker writes: lines before the SDK's framework_ready, whether it sends that
    and waits for start, then stdout ("out") and stderr ("err") lines, a workspace file, its
    exit code; and how alk is set up for it."""

    body: tuple[tuple[str, bytes], ...]
    pre: tuple[bytes, ...] = ()
    ready: bool = True
    package_paths: tuple[str, ...] = ()
    newline_at_eof: bool = True
    file: bytes | None = None
    exit: int = 0
    cap: int = 64 * 1024 * 1024
    line_limit: int = LINE_LIMIT_BYTES
    kill_at: KillAt | None = None

    def chunks(self) -> list[tuple[str, bytes]]:
        """The body as written: a newline after each line, but maybe not after the last of
        each stream."""
        chunks = [(stream, line + b"\n") for stream, line in self.body]
        if not self.newline_at_eof:
            for stream in ("out", "err"):
                last = max((i for i, (s, _) in enumerate(chunks) if s == stream), default=None)
                if last is not None:
                    chunks[last] = (stream, chunks[last][1][:-1])
        return chunks

    def ready_line(self) -> bytes:
        """The SDK's framework_ready, as the worker sends it."""
        return (json.dumps({"channel": "framework", "type": "framework_ready", "payload": {
            "framework": "fuzz", "framework_version": "1.0",
            "package_paths": list(self.package_paths)}}, ensure_ascii=False,
            separators=(",", ":")) + "\n").encode()

    def script(self) -> str:
        def b64(data: bytes) -> str:
            return base64.b64encode(data).decode("ascii")
        return json.dumps({
            "pre": [b64(line + b"\n") for line in self.pre], "ready": self.ready,
            "package_paths": list(self.package_paths),
            "body": [[stream, b64(data)] for stream, data in self.chunks()],
            "file": None if self.file is None else b64(self.file), "exit": self.exit})


# A conformant run for EXPECT: with nothing else, the repeat passes.
GOOD_LINES = (
    b'{"channel":"tool","type":"call","payload":{"name":"lookup"}}',
    b'{"channel":"tool","type":"result","payload":{"name":"lookup","ok":true}}',
    b'{"channel":"tool","type":"call","payload":{"name":"' + b"n" * 140 + b'"}}',
    b'{"channel":"agent","type":"result","payload":{"output":"done","stop_reason":"accepted",'
    b'"end_state":{"phase":"stopped","n":[1,{"a":null}]}}}',
)
GOOD_FILE = b'[{"phase":"stopped"}]'


def _event(payload: bytes, channel: bytes = b"agent", type: bytes = b"x") -> bytes:
    return b'{"channel":"%s","type":"%s","payload":%s}' % (channel, type, payload)


# Every run tries these first, whatever is generated: one line of each kind named above.
CLASSICS = Session(
    pre=(_event(b'{"framework":"fuzz","framework_version":"1.0","package_paths":'
                b'["/opt/fw/pkg",7,"\\u202e",null]}', b"framework", b"framework_ready"),),
    body=(
        ("out", _event(b'{"p":' + b"[" * 97 + b"]" * 97 + b"}")),  # 99 levels: an event
        ("out", _event(b'{"p":' + b"[" * 98 + b"]" * 98 + b"}")),  # 100
        ("out", _event(b'{"p":' + b"[" * 99 + b"]" * 99 + b"}")),  # 101: too deep
        ("out", _event(b'{"p":' + b"[" * 1200 + b"]" * 1200 + b"}")),  # past recursion
        ("out", b"[" * 1200),
        ("out", _event(b'{"big":1e999,"small":-1e400,"n":NaN,"i":Infinity,"m":-Infinity}')),
        ("out", _event(b'{"n":' + b"9" * 4300 + b"}")),
        ("out", _event(b'{"n":' + b"9" * 4301 + b"}")),
        ("out", _event(b'{"s":"\\ud800\\udfff\\u202e\\u0000\\u0085",'
                       b'"k":"\xe2\x80\xae\xc2\x85"}', type=b"\\ud800")),
        ("out", _event(b'{"name":"\\udc00","ok":"true"}', b"tool", b"result")),
        ("out", _event(b'{"name":' + b"[]" + b"}", b"tool", b"call")),
        ("out", _event(b"{}", type=b"n" * 129)),
        ("out", _event(b'{"exit_code":0}', b"harness", b"exit")),
        ("out", _event(b"null")),
        ("out", b'"just a string"'),
        ("out", b"\xff\xfe\xed\xa0\x80"),
        ("out", b""),
        ("out", _event(b'{"point":"p","occurrence":2147483648}', b"framework", b"fault")),
        ("out", _event(b'{"output":"done","stop_reason":"accepted","end_state":{}}',
                       type=b"result")),
        ("out", _event(b'{"output":["done"],"stop_reason":1,"end_state":[]}', type=b"result")),
        ("err", "\u202e\x85\x00\U0001f600 ".encode() + SECRET.encode()),
        ("err", b"Traceback (most recent call last):\n  File \"/opt/fw/pkg/m.py\", line 1, "
                b"in f\nValueError: \xff"),
        ("out", _event(b'{"s":"' + b"\xf0\x9f\x98\x80" * 50_000 + b'"}')),
    ),
    newline_at_eof=False, file=b"[" * 100 + b"]" * 100, exit=3)

out = st.tuples(st.just("out"), stdout_line)
err = st.tuples(st.just("err"), stderr_line)
well_formed_out = st.tuples(st.just("out"), well_formed_line)
MODES = {"hostile": mix((3, out), (1, err)),
         "mixed": mix((1, out), (2, well_formed_out), (1, err)),
         "well_formed": mix((3, well_formed_out), (1, err))}
PRE = st.lists(either(ready_line, stdout_line), max_size=3)


@st.composite
def sessions(draw: st.DrawFn, max_lines: int = 40) -> Session:
    """Hostile sessions (any line), mixed ones, and well-formed ones: protocol events only,
    at most a few results, maybe the lines of a run that passes, so that the checks run too."""
    mode = draw(st.sampled_from(["hostile", "hostile", "mixed", "well_formed", "well_formed"]))
    size = draw(st.integers(5, max_lines))  # uniform: lists of 5 lines are not the norm
    body = draw(st.lists(MODES[mode], min_size=size, max_size=size))
    if mode == "well_formed":
        # None, one, or two results (a duplicate is a bad_result).
        extra = [("out", line) for line in draw(st.lists(well_formed_result, max_size=1))]
        if draw(st.booleans()):
            extra += [("out", line) for line in GOOD_LINES]
        for item in extra:
            body.insert(draw(st.integers(0, len(body))), item)
    # A crash now and then: a traceback ends stderr, the exit code is not 0. Whose code raised?
    crash = mode == "well_formed" and not draw(st.integers(0, 3))
    if crash:
        body.append(("err", draw(traceback)))
    well_formed = mode == "well_formed"
    return Session(
        body=tuple(body),
        pre=() if well_formed else tuple(draw(PRE)),
        ready=well_formed or draw(st.sampled_from([True, True, True, False])),
        package_paths=tuple(draw(st.lists(path_text, min_size=int(crash), max_size=3))),
        newline_at_eof=draw(st.booleans()),
        file=draw(weighted(st.just(GOOD_FILE), either(st.none(), stdout_line),
                           3 if well_formed else 1)),
        exit=draw(st.sampled_from([1, 2, 120] if crash else [0] * 12 + [1, 2, 120, 255])),
        cap=draw(st.sampled_from([64 * 1024, 1024 * 1024, 64 * 1024 * 1024])),
        line_limit=LINE_LIMIT_BYTES if well_formed else draw(
            st.sampled_from([LINE_LIMIT_BYTES, LINE_LIMIT_BYTES, 4096])),
        kill_at=draw(st.sampled_from([None, None, None, KillAt("tool", "call", "lookup"),
                                      KillAt("agent", "result", occurrence=2)])),
    )


# --- what must hold --------------------------------------------------------------------------


def _strict_constant(word: str) -> None:
    raise AssertionError(f"non-strict JSON constant written: {word}")


def _strict_float(text: str) -> float:
    number = float(text)
    assert math.isfinite(number), f"a number too large for a float written: {text[:40]}"
    return number


def depth(value: Any) -> int:
    """How deep a parsed JSON value nests (a scalar is 0), without recursion."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, level = stack.pop()
        if isinstance(item, (dict, list)):
            deepest = max(deepest, level)
            stack.extend((child, level + 1)
                         for child in (item.values() if isinstance(item, dict) else item))
    return deepest


def assert_transcript(path: Path) -> None:
    """Strict JSON, ASCII, no deeper than the protocol allows, seq strictly increasing; and
    alk's own reader takes it back."""
    data = path.read_bytes()
    assert data.endswith(b"\n")
    last = 0
    for number, raw in enumerate(data.split(b"\n")[:-1], 1):
        assert raw.isascii(), f"line {number} is not ASCII: {raw[:200]!r}"
        item = json.loads(raw, parse_constant=_strict_constant, parse_float=_strict_float)
        assert isinstance(item, dict) and type(item["seq"]) is int
        check = (item.get("source"), item["type"]) == ("harness", "check")
        bound = CHECK_DEPTH if check else PROTOCOL_DEPTH
        assert depth(item) <= bound, f"line {number} nests {depth(item)} deep"
        # Never needed for what the protocol lets through.
        assert item.get("payload") != UNRECORDABLE, f"line {number}: {item['type']}"
        assert item["seq"] > last, f"line {number}: seq {item['seq']} after {last}"
        last = item["seq"]
    assert len(read_transcript(path)) == data.count(b"\n")


def assert_sound(obs: Observation, checks: tuple, verdict: Any, transcript: Path) -> None:
    assert isinstance(obs, Observation) and isinstance(verdict, Attribution)
    cause = Cause(verdict.cause)  # raises for a code outside the catalogue
    assert verdict.outcome is CATALOGUE[cause].outcome
    assert cause is not Cause.HARNESS_ERROR, verdict.detail
    assert obs.harness_error is None
    assert len(verdict.detail) <= ATTRIBUTION_DETAIL_CHARS
    assert len(obs.stderr_tail) <= TAIL_CHARS + 1
    assert len(obs.violations) == min(obs.violation_count, MAX_VIOLATIONS_KEPT)
    for violation in obs.violations:
        assert len(violation.detail) <= VIOLATION_DETAIL_CHARS, violation
    assert sum(map(len, obs.path)) <= MAX_PATH_CHARS + STEP_CHARS
    assert sum(map(len, obs.trajectory)) <= MAX_TRAJECTORY_CHARS + STEP_CHARS
    assert len(obs.tool_calls) <= MAX_TOOL_NAMES
    assert all(len(name) <= MAX_NAME_CHARS for name in obs.tool_calls)
    assert all(len(point) <= MAX_NAME_CHARS for point, _ in obs.faults_fired)
    if obs.preflight is not None:
        assert len(obs.preflight.framework or "") <= MAX_IDENTITY_CHARS
        assert len(obs.preflight.version or "") <= MAX_IDENTITY_CHARS
    # Checks keep short values as sent: what writes them (the transcript, the detail) redacts.
    kept = [verdict.detail, obs.stderr_tail, *(v.detail for v in obs.violations)]
    assert not [text for text in kept if SECRET in text]
    assert SECRET.encode() not in transcript.read_bytes()
    assert_transcript(transcript)


def reached(obs: Observation, verdict: Attribution) -> None:
    """What an example reached, for pytest --hypothesis-show-statistics."""
    hypothesis.event(f"cause {verdict.cause}")
    for kind in sorted({v.kind for v in obs.violations}):
        hypothesis.event(f"violation {kind}")


def checks_for(obs: Observation, workspace: Path) -> tuple:
    if obs.result is None:
        return ()
    return expectation.check(EXPECT, obs.result, obs.tool_calls, workspace,
                             obs.uncounted_tool_calls, REDACTOR)


def close(log: TranscriptWriter, checks: tuple, verdict: Any) -> None:
    """As the executor ends a repeat: its checks and its attribution, then the file closed."""
    for item in checks:
        log.harness("check", {"name": item.name, "ok": item.ok, "expected": item.expected,
                              "actual": item.actual})
    log.harness("attribution", {"outcome": verdict.outcome.value, "cause": verdict.cause,
                                "detail": REDACTOR.cut(verdict.detail, 500)})
    log.close()


@contextlib.contextmanager
def python_recursion_limit() -> Iterator[None]:
    raised = sys.getrecursionlimit()
    sys.setrecursionlimit(RECURSION_LIMIT)
    try:
        yield
    finally:
        sys.setrecursionlimit(raised)


# --- through the real runner -----------------------------------------------------------------


RUNNER = LocalRunner()


@pytest.fixture(scope="module")
def fuzz_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("fuzz")


def judge(obs: Observation, workspace: Path, log: TranscriptWriter,
          transcript: Path) -> tuple[Observation, Attribution]:
    """Checks and attributes a repeat as the executor does, closes its transcript, and asserts
    what must hold whatever the worker wrote."""
    checks = checks_for(obs, workspace)
    verdict = attribute(obs, checks, REDACTOR)
    close(log, checks, verdict)
    assert_sound(obs, checks, verdict, transcript)
    return obs, verdict


def replay(session: Session, folder: Path) -> tuple[Observation, Attribution]:
    """Runs the session in a real worker process, checks and attributes the repeat as the
    executor does, and asserts what must hold."""
    workspace = Path(tempfile.mkdtemp(prefix="w-", dir=folder))
    transcript = workspace.with_suffix(".jsonl")
    try:
        script = workspace / "script.json"
        script.write_text(session.script(), encoding="ascii")
        argv = (sys.executable, str(REPLAY), str(script))
        isolation = RUNNER.isolation
        env = {"PATH": os.environ["PATH"], "PYTHONPATH": str(SRC), "HOME": str(workspace),
               "TMPDIR": str(workspace)}
        request = RunRequest(
            argv=argv, cwd=str(workspace), env=env, timeout_s=30.0,
            hello=hello_message("fuzz"), start=START, line_limit_bytes=session.line_limit,
            redactor=REDACTOR, network=isolation.strongest_network,
            filesystem=isolation.strongest_filesystem, kill_at=session.kill_at,
            visible=visible_paths(argv, str(WORKERS), env["PATH"], extra=(str(SRC),)))
        log = TranscriptWriter(transcript, session.cap, REDACTOR)
        obs = RUNNER.run(request, GATE, log)
        assert obs.spawned, obs.spawn_error
        return judge(obs, workspace, log, transcript)
    finally:
        remove_tree(workspace)
        transcript.unlink(missing_ok=True)


@settings(max_examples=PROCESS_EXAMPLES, deadline=None,
          suppress_health_check=SLOW_DATA)
@given(session=sessions())
@example(session=CLASSICS)
def test_whatever_a_worker_writes_the_runner_attributes_it(session: Session,
                                                           fuzz_dir: Path) -> None:
    with python_recursion_limit():
        reached(*replay(session, fuzz_dir))


def test_the_replay_worker_passes_when_it_writes_a_good_run(fuzz_dir: Path) -> None:
    """The fuzz test's worker itself: a conformant body passes, so the fuzzing reaches the
    stages after the handshake."""
    obs, verdict = replay(Session(body=tuple(("out", line) for line in GOOD_LINES),
                                  file=GOOD_FILE), fuzz_dir)
    assert (verdict.cause, obs.violation_count) == (Cause.PASSED, 0), verdict.detail


# --- through the pure stages alone -----------------------------------------------------------


def reads_of(data: bytes, sizes: list[int]) -> list[bytes]:
    """`data` in reads of the given sizes, in turn (at most about 2,000 reads)."""
    floor = len(data) // 2000 + 1
    chunks, at = [], 0
    while at < len(data):
        size = max(sizes[len(chunks) % len(sizes)], floor)
        chunks.append(data[at:at + size])
        at += size
    return chunks


def run_pure(session: Session, reads: list[int], folder: Path
             ) -> tuple[Observation, Attribution]:
    """The runner's stages without a process: the stdout bytes split into reads of the given
    sizes, lines decoded and followed, the version gate, stderr, the transcript, attribution."""
    workspace = Path(tempfile.mkdtemp(prefix="p-", dir=folder))
    transcript = workspace.with_suffix(".jsonl")
    try:
        if session.file is not None:
            (workspace / "out.json").write_bytes(session.file)
        log = TranscriptWriter(transcript, session.cap, REDACTOR)
        state = ProtocolState(workspace=str(workspace), redactor=REDACTOR)
        preflight: Preflight | None = None
        log.harness("hello", hello_message("fuzz"))

        def line(raw: bytes, cut: bool) -> None:
            nonlocal preflight
            outcome = state.accept(decode_line(raw, cut, REDACTOR))
            if isinstance(outcome, Violation):
                log.harness("violation", {"kind": outcome.kind, "line": outcome.line,
                                          "detail": outcome.detail})
                return
            log.worker(outcome.channel, outcome.type, outcome.payload)
            if outcome.type == "framework_ready" and state.phase is Phase.READY \
                    and preflight is None:
                preflight = GATE(outcome.payload)
                state.phase = Phase.STARTED if preflight.ok else Phase.ABORTED
                log.harness("preflight", {"ok": preflight.ok, "cause": preflight.cause,
                                          "detail": preflight.detail})

        stdout = b"".join(line + b"\n" for line in session.pre)
        stdout += session.ready_line() if session.ready else b""
        stdout += b"".join(data for stream, data in session.chunks() if stream == "out")
        stderr = b"".join(data for stream, data in session.chunks() if stream == "err")
        lines = LineSplitter(session.line_limit)
        sink = StderrSink(log, REDACTOR, session.line_limit)
        for chunk in reads_of(stdout, reads):
            for raw, cut in lines.feed(chunk):
                line(raw, cut)
        for chunk in reads_of(stderr, reads):
            sink.feed(chunk)
        for raw, cut in lines.flush():
            line(raw, cut)
        sink.flush()
        log.harness("exit", {"exit_code": session.exit})
        obs = Observation(
            spawned=True, ready=state.ready, preflight=preflight,
            started=state.phase is Phase.STARTED, exit_code=session.exit,
            result=state.result, bad_result=state.bad_result, tool_calls=dict(state.tool_calls),
            uncounted_tool_calls=state.uncounted_tool_calls, trajectory=tuple(state.trajectory),
            violations=tuple(state.violations), violation_count=state.violation_count,
            stderr_tail=sink.tail(), faults_fired=frozenset(state.faults_fired),
            path=tuple(state.path), path_hash=state.path_hash.hexdigest(),
            trajectory_hash=state.trajectory_hash.hexdigest(), model_turns=state.model_turns,
            script_exhausted=state.script_exhausted,
            limits={"memory_mb": 8192, "max_open_files": 1024})
        return judge(obs, workspace, log, transcript)
    finally:
        remove_tree(workspace)
        transcript.unlink(missing_ok=True)


@settings(max_examples=PURE_EXAMPLES, deadline=None,
          suppress_health_check=SLOW_DATA)
@given(session=sessions(),
       reads=st.lists(st.sampled_from([1, 7, 4096, 65_536, 1 << 20]) | st.integers(1, 1 << 17),
                      min_size=1, max_size=6))
@example(session=CLASSICS, reads=[1 << 20])
@example(session=CLASSICS, reads=[7])
def test_whatever_a_worker_writes_the_pure_stages_attribute_it(session: Session,
                                                               reads: list[int],
                                                               fuzz_dir: Path) -> None:
    with python_recursion_limit():
        reached(*run_pure(session, reads, fuzz_dir))
