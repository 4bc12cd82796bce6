"""Every exception alk raises on purpose derives from `AlkError`.

A misbehaving worker is data (an `Observation`, an `Attribution`), never an exception: these
mean alk itself cannot go on. The CLI prints them without a traceback.

    AlkError
    ├── LaneError        a lane file is missing or malformed (exit 2)
    ├── UsageError       command-line values that cannot work together (exit 2)
    ├── RunNotFoundError a run id, scenario or repeat with no saved files
    ├── TranscriptError  a transcript or result file that cannot be read
    │   └── ResultFormatError  a result document of another schema, or with a wrong field
    ├── ResumeError      a run that cannot be resumed (changed lane or version, no journal)
    ├── RunWriteError    a run's journal or result cannot be written (a full disk): resume it
    ├── CheckError       one of a lane's checks could not be carried out (voids the repeat)
    ├── CassetteError    a model cassette that cannot be replayed (voids the run)
    └── RerunError       a repeat that cannot be run again as it ran
"""


class AlkError(Exception):
    """Root of alk's own errors; `str(error)` is a complete message for a person."""


class LaneError(AlkError):
    """Raised when a lane cannot be found or does not validate; names the file and the field."""


class UsageError(AlkError):
    """Raised when options are valid one by one but not together (e.g. an unknown scenario id)."""


class RunNotFoundError(AlkError):
    """Raised when `alk report` or `alk show` is given a run, scenario or repeat that has no files."""


class TranscriptError(AlkError):
    """Raised when a saved transcript or result document is unreadable or of an unknown schema."""


class ResultFormatError(TranscriptError):
    """A result document that is not one this alk can read: another schema, or a field of the
    wrong type. The message names the field."""


class ResumeError(AlkError):
    """Raised when `alk run --resume` cannot go on with a run as it began: its journal is
    missing or unreadable, its lane file or its worker's framework version changed, or another
    alk holds it. The run is left as it was."""


class RunWriteError(AlkError):
    """Raised when a run's journal or result cannot be written: the run stops as if killed,
    its finished repeats in the journal, to be resumed once the cause is gone."""


class CheckError(AlkError):
    """Raised when alk cannot carry out a lane's check, such as a regular expression that does
    not finish in time: the lane is at fault, so the repeat is void, never the agent's."""


class CassetteError(AlkError):
    """A cassette alk cannot replay; the message names the file, the line and what to do."""


class RerunError(AlkError):
    """Raised when `alk rerun` cannot run a repeat again as it ran: its lane file changed
    (unless the rerun is told to run it anyway), or the run recorded a model cassette."""
