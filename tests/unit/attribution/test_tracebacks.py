"""alk.attribution.tracebacks: the exception that ended a process, read from tracebacks that real
Python child processes printed, in every shape CPython prints them
(tests/helpers/real_tracebacks.py); and whatever else the text is, it never raises."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from alk.attribution import tracebacks
from alk.attribution.tracebacks import CHAINED, HEADER, MAX_GROUP_DEPTH, Raised, last
from alk.redaction import Redactor

from helpers.real_tracebacks import Programs

GENERATED = "Error while generating output:\nscripted model exhausted after 1 turns"


@pytest.fixture(scope="module")
def programs(tmp_path_factory: pytest.TempPathFactory) -> Programs:
    return Programs(tmp_path_factory.mktemp("tracebacks"))


def frame(programs: Programs, text: str, file: str = "fw/agents.py") -> tuple[str, str]:
    path, line = programs.line(text, file).rsplit(":", 1)
    return path, line


def test_an_exception_of_one_line_ends_the_text(programs: Programs) -> None:
    found = last(programs.run("one_line").stderr)
    assert found is not None and found.ends
    [raised] = found.chain
    assert (raised.kind, raised.message) == ("RuntimeError", "no tool named lookup")
    assert raised.frames == (frame(programs, 'agents.dispatch("lookup")', "worker.py"),
                             frame(programs, "raise RuntimeError"))


def test_a_message_of_several_lines_is_the_exceptions_whole(programs: Programs) -> None:
    ran = programs.run("multiline")
    found = last(ran.stderr)
    assert found is not None and not found.ends  # lines follow the exception's first
    model, raised = found.chain  # `raise ... from exc`: the direct cause comes first
    assert (model.kind, model.message) == ("RuntimeError", "scripted model exhausted after 1 turns")
    assert model.frames[-1] == frame(programs, "raise RuntimeError", "worker.py")
    assert (raised.kind, raised.name) == ("fw.agents.AgentGenerationError", "AgentGenerationError")
    assert raised.message == GENERATED
    assert raised.frames[-1] == frame(programs, "raise AgentGenerationError")
    assert ran.stderr.rstrip().endswith("scripted model exhausted after 1 turns")


def test_an_exception_during_the_handling_of_another_follows_it(programs: Programs) -> None:
    ran = programs.run("context")
    assert CHAINED[1] in ran.stderr and CHAINED[0] not in ran.stderr
    found = last(ran.stderr)
    assert found is not None and found.ends
    assert [(r.kind, r.message) for r in found.chain] == [
        ("RuntimeError", "scripted model exhausted after 1 turns"),
        ("ValueError", "the fallback failed too")]
    assert found.chain[-1].frames[-1] == frame(programs, 'raise ValueError("the fallback')


def test_a_chain_of_three_keeps_them_in_order(programs: Programs) -> None:
    found = last(programs.run("twice").stderr)
    assert found is not None
    assert [(r.kind, r.message) for r in found.chain] == [
        ("RuntimeError", "scripted model exhausted after 1 turns"),
        ("ValueError", "the fallback failed too"), ("RuntimeError", "no tool named fallback")]


@pytest.mark.parametrize("shape", ["group", "logged_group"],
                         ids=["printed_by_the_interpreter", "printed_by_the_traceback_module"])
def test_a_group_is_followed_to_its_first_exception(programs: Programs, shape: str) -> None:
    # The interpreter (3.11) prints a message's later lines without the group's `| ` prefix,
    # the traceback module (and later Pythons) with it: both read the same.
    ran = programs.run(shape)
    assert "+ Exception Group Traceback (most recent call last):" in ran.stderr
    found = last(ran.stderr)
    assert found is not None and found.ends
    [raised] = found.chain
    assert raised.groups == ("ExceptionGroup", "ExceptionGroup")
    assert (raised.name, raised.message) == ("AgentGenerationError", GENERATED)
    # The group's frames, outermost first, then its first exception's.
    worker, group, call, generate, raise_ = raised.frames
    assert (worker[0], generate[0]) == (programs.worker, programs.worker)  # the lambda's
    assert (group, call, raise_) == (frame(programs, 'raise ExceptionGroup("unhandled'),
                                     frame(programs, "            call()"),
                                     frame(programs, "raise AgentGenerationError"))


def test_a_raised_group_inside_a_group_is_followed_through_its_frames(
        programs: Programs) -> None:
    ran = programs.run("raised_groups")
    assert "    | Exception Group Traceback (most recent call last):" in ran.stderr
    found = last(ran.stderr)
    assert found is not None and found.ends
    [raised] = found.chain
    assert raised.groups == ("ExceptionGroup",) * 3
    assert (raised.kind, raised.message) == ("RuntimeError",
                                             "scripted model exhausted after 1 turns")
    assert raised.frames[2:] == (frame(programs, 'raise ExceptionGroup("unhandled'),
                                 frame(programs, "            call()"),
                                 frame(programs, "raise RuntimeError", "worker.py"))


def test_a_group_whose_first_exception_cannot_be_read_is_named_itself(
        programs: Programs) -> None:
    lines = programs.run("group").stderr.splitlines()
    first = lines.index("  +-+---------------- 1 ----------------")
    second = lines.index("    +---------------- 2 ----------------")
    found = last("\n".join(lines[:first + 1] + lines[second:]))
    assert found is not None
    [raised] = found.chain
    assert (raised.kind, raised.message, raised.groups) == (
        "ExceptionGroup", "unhandled errors (2 sub-exceptions)", ())
    assert raised.frames[-1] == frame(programs, 'raise ExceptionGroup("unhandled')


def test_a_groups_exception_without_a_traceback_follows_its_cause(programs: Programs) -> None:
    ran = programs.run("unraised_cause")
    assert CHAINED[0] in ran.stderr
    found = last(ran.stderr)
    assert found is not None and found.ends
    [raised] = found.chain
    assert (raised.kind, raised.message, raised.groups) == ("KeyError", "'k'", ("ExceptionGroup",))
    assert raised.frames == (frame(programs, "raise ExceptionGroup(\"gathered\", [error])",
                                   "worker.py"),)


def test_groups_nested_past_a_bound_are_followed_no_deeper(programs: Programs) -> None:
    found = last(programs.run("nested_groups").stderr)
    assert found is not None
    [raised] = found.chain
    assert len(raised.groups) == MAX_GROUP_DEPTH - 1
    assert (raised.kind, raised.message) == (
        "ExceptionGroup", f"level {40 - MAX_GROUP_DEPTH} (1 sub-exception)")


def test_lines_after_a_group_end_it_no_more(programs: Programs) -> None:
    text = programs.run("group").stderr + "giving up\n"
    found = last(text)
    assert found is not None and not found.ends
    assert found.chain[-1].name == "AgentGenerationError"


def test_a_message_that_draws_a_table_is_no_group(programs: Programs) -> None:
    found = last(programs.run("table").stderr)
    assert found is not None and not found.ends
    [raised] = found.chain
    assert raised.groups == ()
    assert raised.message == "no row matched:\n+-+----+\n| 742 |\n+-+----+"


def test_a_handled_traceback_reads_as_a_message_with_what_followed(programs: Programs) -> None:
    # The text alone cannot tell; attribution decides with the exit status.
    ran = programs.run("handled", "2")
    assert ran.status == 2
    found = last(ran.stderr)
    assert found is not None and not found.ends
    assert found.chain[-1].message == "the fallback failed too\ngiving up: no fallback left"


def test_a_syntax_errors_frame_has_no_function(programs: Programs) -> None:
    found = last(programs.run("syntax").stderr)
    assert found is not None
    assert found.chain[-1].kind == "SyntaxError"
    assert found.chain[-1].frames[-1] == (str(Path(programs.framework) / "broken.py"), "1")


def test_a_cut_tail_keeps_the_end_of_a_traceback_whose_header_it_lost(
        programs: Programs) -> None:
    whole = programs.run("deep").stderr
    header = whole.rindex(HEADER)
    kept = len(whole) - header - len(HEADER) - 30  # the last header and a frame's start go
    tail = Redactor().tail(whole, kept, truncated=True)
    assert tail.startswith("…") and HEADER not in tail
    found = last(tail)
    assert found is not None
    [raised] = found.chain  # the sections before it went with the cut
    assert (raised.name, raised.message) == ("AgentGenerationError", GENERATED)
    assert raised.frames[-1] == frame(programs, "raise AgentGenerationError")
    assert raised.frames[0] != frame(programs, "agents.recurse(60, model)", "worker.py")
    # Without the mark of a cut, frames without a header are no traceback.
    assert last(tail.removeprefix("…")) is None


def test_a_chain_whose_first_header_was_cut_keeps_the_rest(programs: Programs) -> None:
    whole = programs.run("multiline").stderr
    tail = "…" + whole[whole.index(HEADER) + len(HEADER):]
    found = last(tail)
    assert found is not None
    assert [r.name for r in found.chain] == ["AgentGenerationError"]


def test_a_sleeping_program_interrupted_shows_where_it_slept(programs: Programs) -> None:
    found = last(programs.interrupted("sleep").stderr)
    assert found is not None and found.ends
    [raised] = found.chain
    assert (raised.kind, raised.message) == ("KeyboardInterrupt", "")
    assert raised.frames[-1] == frame(programs, "time.sleep(600)")


def test_asyncio_shows_its_cancelled_task_before_the_interrupt(programs: Programs) -> None:
    found = last(programs.interrupted("asyncio").stderr)
    assert found is not None
    cancelled, interrupt = found.chain
    assert (cancelled.name, interrupt.name) == ("CancelledError", "KeyboardInterrupt")
    assert frame(programs, "await asyncio.sleep(600)") in cancelled.frames
    assert frame(programs, "await asyncio.sleep(600)") not in interrupt.frames


@pytest.mark.parametrize("text", [
    "", "\n\n", "just a line\n", f"{HEADER}\n", f"{HEADER}\n  File \"/a.py\", line 3, in f\n",
    f"{HEADER}\n  File \"/a.py\", line 3, in f\n    x()\n  \n",
    f"{HEADER}\n  File \"/a.py\", line 3, in f\n3 is not a type: x\n",
    "…  File \"/a.py\", line 3, in f\n", "…no frame here\nValueError: x\n",
    "  + Exception Group Traceback (most recent call last):\n",
])
def test_text_that_holds_no_complete_traceback_gives_none(text: str) -> None:
    assert last(text) is None


def test_the_last_traceback_is_read_whatever_came_before(programs: Programs) -> None:
    earlier = programs.run("context").stderr
    found = last(earlier + "retrying\n" + programs.run("one_line").stderr)
    assert found is not None and [r.kind for r in found.chain] == ["RuntimeError"]


def test_a_separator_without_the_section_before_it_ends_the_chain(programs: Programs) -> None:
    final = programs.run("one_line").stderr
    for separator in CHAINED:
        found = last(f"junk\n\n{separator}\n\n{final}")
        assert found is not None and len(found.chain) == 1
        # With the section before it complete, the separator joins the two.
        found = last(f"{programs.run('one_line').stderr}\n{separator}\n\n{final}")
        assert found is not None and len(found.chain) == 2
        # Without its blank lines, it is no separator Python printed.
        found = last(f"{programs.run('one_line').stderr}{separator}\n\n{final}")
        assert found is not None and len(found.chain) == 1


def test_an_earlier_section_that_does_not_parse_ends_the_chain(programs: Programs) -> None:
    final = programs.run("one_line").stderr
    found = last(f"{HEADER}\n  File \"/a.py\", line 1, in f\n\n{CHAINED[0]}\n\n{final}")
    assert found is not None and len(found.chain) == 1


def test_a_name_is_the_types_own() -> None:
    assert Raised("f.<locals>.Err", "", ()).name == "Err"
    assert Raised("KeyError", "", ()).name == "KeyError"


FRAGMENTS = st.sampled_from([
    HEADER, f"  + {tracebacks.GROUP_HEADER}", *CHAINED, "", "  File \"/a.py\", line 3, in f",
    "    x()", "ValueError: x", "KeyError", "  | ", "  |   File \"/b.py\", line 9, in g",
    "  | ValueError: y", "  +-+---------------- 1 ----------------", "    | TypeError: z",
    "    +------------------------------------", "…", "  +-+", "|", "+--", "  File \"",
])


@settings(max_examples=300, deadline=None)
@given(lines=st.lists(FRAGMENTS | st.text(max_size=40), max_size=40))
def test_no_text_makes_it_raise(lines: list[str]) -> None:
    found = last("\n".join(lines))
    if found is not None:
        assert found.chain and all(isinstance(r, Raised) for r in found.chain)
