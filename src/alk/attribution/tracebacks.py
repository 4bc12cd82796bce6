"""Python tracebacks as a worker's stderr shows them: the exception that ended the process, and
the frames it went through. Pure, and it never raises, whatever the text: a worker writes it.

It reads what CPython's default hook prints: a chain of sections joined by `The above exception
was the direct cause of the following exception:` or `During handling of the above exception,
another exception occurred:`, exception groups (Python 3.11+: `+ Exception Group Traceback`, each
sub-exception in a block of lines prefixed `| ` one level deeper), and messages of several lines
(which Python 3.11 prints without the `| ` prefix inside a group). Of a group, the first
sub-exception is followed down to the exception it holds: that one is what failed, the group
only gathered it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from alk.redaction import ELLIPSIS

HEADER = "Traceback (most recent call last):"
GROUP_HEADER = "Exception Group Traceback (most recent call last):"
CHAINED = ("The above exception was the direct cause of the following exception:",
           "During handling of the above exception, another exception occurred:")
# A frame line without its prefix: `  File "/path/mod.py", line 12, in run` (a SyntaxError's
# frame has no `, in`). The greedy path keeps the last `", line N` of the line.
_FRAME = re.compile(r'  File "(.+)", line (\d+)')
# The exception's line: its type as printed (module and qualified name, `<locals>` too), then
# its message's first line after `: `, if it has a message.
_RAISED = re.compile(r"([^\W\d][\w.<>]*)(?:: (.*))?")
# A group's closing line, the last it prints: `+------------------------------------`.
_CLOSE = re.compile(r" +\+-+")
# Inside a group's block, Python's own lines all begin with spaces and `|` or `+`.
_GROUP_LINE = re.compile(r" *[|+]")
# The interpreter prints groups 10 deep (the traceback module, as deep as it is told): past
# this depth a group is named itself, which keeps the recursion short whatever the text.
MAX_GROUP_DEPTH = 16


@dataclass(frozen=True, slots=True)
class Raised:
    """One exception of a traceback: its type as printed, its message (lines joined with \\n),
    its frames (file, line) outermost first, and the groups it was raised in, outermost first
    (their frames come first in `frames`)."""

    kind: str
    message: str
    frames: tuple[tuple[str, str], ...]
    groups: tuple[str, ...] = ()

    @property
    def name(self) -> str:
        """The type's own name, without its module: `AgentGenerationError`."""
        return self.kind.rsplit(".", 1)[-1]


@dataclass(frozen=True, slots=True)
class Traceback:
    """The last traceback on stderr. `chain` holds its sections, the first cause first: the
    last one is the exception that propagated. `ends` says no line follows the traceback's own
    structure: a plain section's exception line is the last line (a message of one line), or a
    group's closing line is."""

    chain: tuple[Raised, ...]
    ends: bool


def last(text: str) -> Traceback | None:
    """The last complete traceback of `text` (a stderr tail), or None if there is none."""
    # Split on newlines only: a message may hold other line separators (U+2028) as they are.
    lines = text.rstrip().split("\n")
    heads = [i for i, line in enumerate(lines)
             if line == HEADER or line == f"  + {GROUP_HEADER}"]
    if heads:
        start = heads[-1]
    elif text.startswith(ELLIPSIS):
        # A tail that was cut may have lost the header of a long traceback: its frames and
        # exception line, the part that matters, are what was kept.
        start = next((i for i, line in enumerate(lines) if _FRAME.match(line)), len(lines))
    else:
        return None
    final = _section(lines[start:])
    if final is None:
        return None
    if lines[start] == f"  + {GROUP_HEADER}":
        ends = _CLOSE.fullmatch(lines[-1]) is not None
    else:  # every line after a plain section's exception line is its message's
        ends = "\n" not in final.message
    chain = [final]
    # An earlier section of the chain ends just before `\n<CHAINED>\n\n` and the header of
    # the one after it; it begins at the header before.
    before = [i for i in heads if i < start]
    while before and lines[start - 3:start] in (["", joint, ""] for joint in CHAINED):
        cause = _section(lines[before[-1]:start - 3])
        if cause is None:
            break
        chain.insert(0, cause)
        start = before.pop()
    return Traceback(tuple(chain), ends)


def _section(lines: list[str]) -> Raised | None:
    """The exception of a top-level section, whose first line is its header (or, in a cut
    tail, its first frame)."""
    if lines and lines[0] == f"  + {GROUP_HEADER}":
        return _exception(_merged(lines), 1)
    return _exception(lines, 0)


def _merged(lines: list[str]) -> list[str]:
    """A group's lines, each line Python 3.11 printed without a prefix (the rest of a message)
    joined to the line before it."""
    merged: list[str] = []
    for line in lines:
        if merged and not _GROUP_LINE.match(line):
            merged[-1] += "\n" + line
        else:
            merged.append(line)
    return merged


def _exception(lines: list[str], depth: int) -> Raised | None:
    """The final exception of a region whose own lines are `depth` groups deep (0: the top
    level, no prefix; n: prefixed by 2n spaces and `| `). Deeper lines are sub-exceptions'."""
    indent = " " * (2 * depth)
    own = f"{indent}| " if depth else ""
    contents: list[tuple[int, str]] = []
    for i, line in enumerate(lines):
        if line.startswith(own):
            contents.append((i, line[len(own):]))
    # Of a chain inside the region, the last section: after the last line that joins two.
    first = 0
    for k, (_, content) in enumerate(contents):
        if content in CHAINED:
            first = k + 1
    while first < len(contents) and (contents[first][1] in (HEADER, GROUP_HEADER)
                                     or not contents[first][1].strip()):
        first += 1
    body = contents[first:]
    frames: list[tuple[str, str]] = []
    k = 0
    while k < len(body) and body[k][1].startswith(" "):
        match = _FRAME.match(body[k][1])
        if match:
            frames.append((match[1], match[2]))
        k += 1
    if k == len(body):
        return None
    at, line = body[k]
    head, *more = line.split("\n")
    raised = _RAISED.fullmatch(head)
    if raised is None:
        return None
    # The rest of the message: the region's own lines after the exception's (no own line
    # follows a group's first sub-exception, whose lines are a level deeper).
    message = "\n".join([raised[2] or "", *more, *(c for _, c in body[k + 1:])])
    sub = next((j for j in range(at + 1, len(lines)) if depth
                and lines[j].startswith(f"{indent}+-+")), len(lines))
    if sub < len(lines) and depth < MAX_GROUP_DEPTH:
        # A group: its first sub-exception's block runs to the next one's line, or the closing
        # one (the first line of a group nested in it is `+-+`, not `+--`).
        end = next((j for j in range(sub + 1, len(lines))
                    if lines[j].startswith(f"{indent}  +--")), len(lines))
        inner = _exception(lines[sub + 1:end], depth + 1)
        if inner is not None:
            return Raised(inner.kind, inner.message, tuple(frames) + inner.frames,
                          (raised[1], *inner.groups))
    return Raised(raised[1], message, tuple(frames))
