"""A run whose repeats all agree, or that never started, gets its statistics without numpy: the
figures that need no arithmetic on arrays are worked out before it is imported (about 0.1 s of a
run's fixed cost, and most of a never-started run's statistics). Checked in a fresh interpreter,
since this one has numpy loaded already."""

import subprocess
import sys

import pytest

CODE = """
import sys
from alk.stats.consistency import lane_mean, resource_consistencies
from alk.stats.trajectories import sequence_consistencies, tool_use_consistencies
from alk.estimate import Estimate

alike = [("tool:echo:ok", "result"), ("tool:echo:ok", "result"), None]
same = sequence_consistencies([alike, [], [None]])
tools = tool_use_consistencies([alike])
assert same[1:] == [None, None] and same[0] is not None and same[0].value == 1.0, same
assert tools[0] is not None and tools[0].value == 1.0, tools
assert resource_consistencies([{}, {"duration_s": []}]) == [None, None]
one = Estimate(0.5, 0.25, 0.75)
assert lane_mean([None, one]) == one and lane_mean([]) is None
print("numpy" in sys.modules)
"""


@pytest.mark.slow
def test_statistics_of_agreeing_or_no_repeats_import_no_numpy():
    done = subprocess.run([sys.executable, "-c", CODE], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "False"


@pytest.mark.slow
def test_repeats_that_differ_still_get_numpy():
    code = CODE.replace('print("numpy" in sys.modules)',
                        'sequence_consistencies([[("a",), ("b",), ("a",)]])\n'
                        'print("numpy" in sys.modules)')
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "True"
