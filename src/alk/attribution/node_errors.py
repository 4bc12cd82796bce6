"""Node's report of the uncaught exception or unhandled rejection that ended a worker, as its
stderr shows it, read into the shape of a Python traceback (alk.attribution.tracebacks) so the
same rules name and blame it. Pure, and it never raises, whatever the text: a worker writes it.

What Node 18 to 24 print: the source excerpt (`file:///p/w.mjs:12`, the code line, a caret
line), a blank line, the error's stack as util.inspect shows it (`TypeError: boom`, a message
of any number of lines, frames `    at fn (file:///p/w.mjs:12:11)` innermost first), a block of
its own properties after the last frame (`{ code: 'ERR_X', [cause]: ... }`, nested errors
indented two more spaces, an AggregateError's `[errors]: [ ... ]`), and `Node.js v20.1.0` last.
Frames an error shares with its cause are printed once, as `... 2 lines matching cause stack
trace ...`. A thrown value that is not an Error is printed after the caret line as it is, with
no frames.
The `Node.js` line is required: without it the text is not Node's report of how it ended.
"""

from __future__ import annotations

import re
from urllib.parse import unquote

from alk.attribution.tracebacks import Raised, Traceback

# The line Node prints last when an uncaught exception ends it (Node 17 and later).
_VERSION = re.compile(r"Node\.js v\d+\.\d+\.\d+\S*")
# The source excerpt's first line (`file:///p/w.mjs:12`, `node:fs:573`, `[eval]:1`) and its
# caret line, two lines below.
_WHERE = re.compile(r"(\S.*):(\d+)")
_CARET = re.compile(r" *\^+ *")
# A frame's location: `file:///p/x.mjs:12:11`, `/p/x.js:3:1`, `node:internal/x:1:2`.
_LOCATION = re.compile(r"(.+):(\d+):\d+")
# An error's first line: its name, a code or class in brackets (`Error [ERR_X]`, `MyErr
# [Error]`), then its message's first line after `: `. Inspect wraps an error without frames
# in brackets: `[Error: no stack]`.
_HEAD = re.compile(r"([^\W\d][\w$.]*(?: \[[^\]]*\])?)(?:: (.*))?")
# The property that holds a nested error, two spaces in: `[cause]:`, or `cause:` set by hand.
_CAUSE = re.compile(r"  (?:\[cause\]|cause): (.*)")
_ERRORS = "  [errors]: ["
_ELIDED = re.compile(r"    \.\.\. \d+ lines? matching cause stack trace \.\.\.")
_HINT = "(Use `node --trace-uncaught"
# What an unhandled rejection's message says before the part that is its own: the reason.
_REJECTION = "The promise rejected with the reason "
# Causes and AggregateErrors nest: past this depth the error is named itself, which keeps the
# recursion short whatever the text.
MAX_DEPTH = 16
# The name given to a thrown value that is not an Error (`throw "x"`), which has none.
THROWN = "Uncaught"


def last(text: str) -> Traceback | None:
    """The error Node reported as it ended, when `text` (a stderr tail) ends with that
    report, or None. Its causes come first in `chain`, as a Python chain's do."""
    try:
        return _last(text)
    except (RecursionError, ValueError):  # never expected: the parser answers None instead
        return None


def _last(text: str) -> Traceback | None:
    lines = text.rstrip().split("\n")
    if not lines or _VERSION.fullmatch(lines[-1].strip()) is None:
        return None
    region = lines[:-1]
    while region and not region[-1].strip():
        region.pop()
    # The last source excerpt: where the thrown value's report begins.
    start = next((i for i in range(len(region) - 3, -1, -1)
                  if _CARET.fullmatch(region[i + 2]) and _WHERE.fullmatch(region[i])), None)
    where: tuple[str, str] | None = None
    if start is not None:
        found = _WHERE.fullmatch(region[start])
        where = (_path(found[1]), found[2]) if found else None
        body = region[start + 3:]
        if body and body[0].strip():
            return _thrown(body, where)  # not an Error: printed right below the caret
        body = body[1:]
    else:
        # No excerpt (a tail cut before it): the report is the last paragraph's.
        blank = max((i for i, line in enumerate(region) if not line.strip()), default=-1)
        body = region[blank + 1:]
    chain = _error(body, 0)
    if chain is None:
        return None
    final = chain[-1]
    if where is not None and (not final.frames or final.frames[-1] != where):
        # The excerpt is where V8 says it was thrown: for a SyntaxError, the only place the
        # worker's file shows (its frames are Node's loader).
        chain = (*chain[:-1], Raised(final.kind, final.message, (*final.frames, where),
                                     final.groups))
    return Traceback(chain, True)


def _thrown(body: list[str], where: tuple[str, str] | None) -> Traceback | None:
    """A thrown value that is not an Error: its inspected text, then Node's hint (or, with
    --trace-uncaught, `Thrown at:` and frames)."""
    value: list[str] = []
    frames: list[tuple[str, str]] = []
    for k, line in enumerate(body):
        if line.startswith(_HINT):
            break
        if line == "Thrown at:":
            frames = _frames(body[k + 1:])[0]
            break
        value.append(line)
    message = "\n".join(value).strip()
    if message.startswith("Uncaught "):
        message = message[len("Uncaught "):]
    located = list(reversed(frames)) + ([where] if where and not frames else [])
    return Traceback((Raised(THROWN, message, tuple(located)),), True)


def _error(lines: list[str], depth: int) -> tuple[Raised, ...] | None:
    """An error as inspect prints it (head, message, frames, property block), its causes
    first; None when the first line is no error's."""
    if not lines:
        return None
    at = next((k for k, line in enumerate(lines) if line.startswith("    at ")), len(lines))
    frames, end = _frames(lines[at:])
    head, block = lines[:at], lines[at + end:]
    if at == len(lines) and lines[-1] == "}":
        # No frames: the property block opens on the head's last line.
        opener = next((k for k, line in enumerate(lines) if line.endswith(" {")), 0)
        head, block = [*lines[:opener], lines[opener][:-2]], lines[opener + 1:]
    if head and head[0].startswith("[") and head[-1].endswith("]"):
        # An error without frames, as inspect wraps it: `[Error: no stack]`.
        head = list(head)
        head[0] = head[0][1:]
        head[-1] = head[-1][:-1]
    first = head[0] if head else ""
    named = _HEAD.fullmatch(first)
    if named is not None:
        kind, said = named[1], named[2] or ""
    elif frames and ": " in first:
        # A name set by hand (`e.name = "Agent failure"`): with frames below, still an error.
        kind, said = first.split(": ", 1)
    else:
        return None
    message = "\n".join([said, *head[1:]]).strip()
    if _REJECTION in message:
        message = message[message.index(_REJECTION):]
    raised = Raised(kind, message, tuple(reversed(frames)))
    if depth >= MAX_DEPTH:
        return (raised,)
    causes: tuple[Raised, ...] = ()
    for k, line in enumerate(block):
        cause = _CAUSE.fullmatch(line)
        if cause is not None:
            nested = _error([cause[1], *_dedent(_inner(block[k + 1:], 2), 2)], depth + 1)
            causes = nested or ()
            break
        if line == _ERRORS:
            member = _member(block[k + 1:])
            inner = _error(member, depth + 1) if member else None
            if inner is not None:
                sub = inner[-1]
                raised = Raised(sub.kind, sub.message, raised.frames + sub.frames,
                                (kind, *sub.groups))
            break
    return (*causes, raised)


def _frames(lines: list[str]) -> tuple[list[tuple[str, str]], int]:
    """The frames (file, line) of the run of frame lines that `lines` begins with, innermost
    first, and how many lines the run takes."""
    frames: list[tuple[str, str]] = []
    count = 0
    for line in lines:
        if _ELIDED.fullmatch(line):
            count += 1  # the frames its cause shares, which Node prints once, in the cause
            continue
        if not line.startswith("    at "):
            break
        count += 1
        frame = line[len("    at "):].rstrip(",")
        if frame.endswith(" {"):
            frame = frame[:-2]
        location = _location(frame)
        if location is not None:
            frames.append(location)
        if line.endswith(" {"):
            break  # the property block follows
    return frames, count


def _location(frame: str) -> tuple[str, str] | None:
    """`fn (file:///p/x.mjs:12:11)`, `async file:///p/x.mjs:3:1`: the file and line; None for
    a frame with no place in a file (`async Promise.all (index 0)`, `new Promise
    (<anonymous>)`, or eval'd code)."""
    if frame.endswith(")") and " (" in frame:
        frame = frame[frame.index(" (") + 2:-1]
    elif frame.startswith("async "):
        frame = frame[len("async "):]
    if "eval at " in frame:
        return None
    found = _LOCATION.fullmatch(frame)
    return (_path(found[1]), found[2]) if found else None


def _path(where: str) -> str:
    """A file:// URL as the path it names (percent-decoded); anything else as it is."""
    if where.startswith("file:///"):
        return unquote(where[len("file://"):])
    return where


def _inner(lines: list[str], indent: int) -> list[str]:
    """The lines that follow an opening line and belong to it: deeper than `indent` spaces,
    or blank."""
    taken = 0
    for line in lines:
        if line.strip() and len(line) - len(line.lstrip(" ")) <= indent:
            break
        taken += 1
    return lines[:taken]


def _dedent(lines: list[str], by: int) -> list[str]:
    return [line[by:] if line.startswith(" " * by) else line.lstrip(" ") for line in lines]


def _member(lines: list[str]) -> list[str]:
    """The first member of an AggregateError's `[errors]: [` list, as an error of its own:
    its first line four spaces in, the rest deeper, the separating comma dropped."""
    if not lines or not lines[0].startswith("    ") or lines[0].startswith("     "):
        return []
    member = [lines[0], *_inner(lines[1:], 4)]
    member = _dedent(member, 4)
    member[-1] = member[-1].removesuffix(",")
    return member
