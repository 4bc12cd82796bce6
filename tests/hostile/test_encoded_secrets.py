"""A worker that turns its declared secret into the forms anyone can turn back (reversed, hex,
base64 alone and inside a longer encoded text, percent-encoding, JSON escapes) and writes each
everywhere alk keeps or shows something of it (`encoded_secrets_worker.py`): no piece of any
form may be in any file alk wrote, in its output, or in `alk report --json` and `alk show`.
"""

from __future__ import annotations

import importlib.util
import os
import secrets
import subprocess
import sys
from pathlib import Path

WORKER = Path(__file__).resolve().with_name("encoded_secrets_worker.py")
_spec = importlib.util.spec_from_file_location("encoded_secrets_worker", WORKER)
encoded_secrets_worker = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(encoded_secrets_worker)
# A piece this long of a form is a piece of the secret (the existing attacks check raw pieces
# of 12 characters); shorter ones occur in any text.
PIECE = 12

LANE = f"""framework = "hostile"
version = ">=1"
command = ["{{python}}", "{WORKER}"]
required_env = ["HOSTILE_TOKEN"]
timeout_s = 30
[[scenarios]]
id = "a"
task = "t"
[scenarios.expect]
stop_reason = "accepted"
output_equals = "done"
files = [ {{ path = "lab-output/effects.json", json_subset = {{ note = "x" }} }} ]
"""


def test_no_piece_of_any_form_of_a_secret_is_kept_or_shown(tmp_path):
    # A slash, a plus and an equals sign, which URLs and JSON may escape, and a tilde where
    # base64 writes its bits as a character the URL-safe alphabet writes otherwise.
    token = f"tok/{secrets.token_urlsafe(18)}+~?>{secrets.token_hex(6)}="
    (tmp_path / "lanes").mkdir()
    (tmp_path / "lanes" / "encoded.toml").write_text(LANE)
    (tmp_path / "tmp").mkdir()
    env = {**os.environ, "HOSTILE_TOKEN": token, "TMPDIR": str(tmp_path / "tmp"),
           "COLUMNS": "300"}
    done = subprocess.run([sys.executable, "-m", "alk", "run", "--lane",
                           str(tmp_path / "lanes" / "encoded.toml"), "-n", "1"],
                          cwd=tmp_path, env=env, capture_output=True, timeout=120)
    assert done.returncode == 1, done.stderr.decode(errors="replace")[-2000:]
    as_json = subprocess.run([sys.executable, "-m", "alk", "report", "--json"], cwd=tmp_path,
                             env=env, capture_output=True, timeout=60)
    shown = subprocess.run([sys.executable, "-m", "alk", "show", "latest", "a", "1"],
                           cwd=tmp_path, env=env, capture_output=True, timeout=60)
    assert as_json.returncode == 0 and shown.returncode == 0, as_json.stderr + shown.stderr
    blobs = {"alk run's stdout": done.stdout, "alk run's stderr": done.stderr,
             "alk report --json": as_json.stdout, "alk show": shown.stdout}
    files = [p for folder in ("transcripts", "reports") for p in (tmp_path / folder).rglob("*")
             if p.is_file()]
    assert any(p.suffix == ".jsonl" for p in files) and any(p.name == "result.json" for p in files)
    blobs.update({str(p.relative_to(tmp_path)): p.read_bytes() for p in files})
    cores = {name: core for name, (_, core) in encoded_secrets_worker.forms(token).items()}
    pieces = {core[i:i + PIECE]: name for name, core in cores.items()
              for i in range(len(core) - PIECE + 1)}
    for where, blob in blobs.items():
        text = blob.decode("utf-8", "replace")
        # JSON files and outputs escape a backslash: read them back as the text they hold.
        texts = (text, text.replace("\\\\", "\\"))
        found = [(piece, name) for piece, name in pieces.items() if any(piece in t for t in texts)]
        assert not found, (f"{len(found)} pieces in {where}, the first of the "
                           f"{found[0][1]} form: {found[0][0]!r}")
