"""A hostile worker that leaks its declared secret (HOSTILE_TOKEN) transformed: reversed, in hex,
in base64 (alone and inside longer encoded texts, at each alignment), percent-encoded and with
its characters as JSON escapes. It writes every form to stdout events (values and keys), to
stderr, into its tool names and a fault point (where alk cuts them), into its result and its
claim and into a file alk quotes, then crashes, so that alk quotes its last stderr line too.

`forms` is also what the test looks for afterwards.
"""

import base64
import json
import os
import sys
import urllib.parse

from alk import worker


def _fixed_base64(data, before):
    """The characters of base64(`before` bytes + data) made of `data`'s bits alone."""
    encoded = base64.b64encode(bytes(before) + data).decode()
    return encoded[-(-8 * before // 6):8 * (before + len(data)) // 6]


def _json_escapes(text, every=1, case=str.lower):
    return "".join("\\u" + case(f"{ord(c):04x}") if i % every == 0 else c
                   for i, c in enumerate(text))


def forms(secret):
    """name: (what the worker writes, the part of it made of the secret alone)."""
    data = secret.encode()
    found = {
        "reversed": secret[::-1],
        "hex": data.hex(),
        "HEX": data.hex().upper(),
        "hex reversed": data.hex()[::-1],
        "base64": base64.b64encode(data).decode(),
        "base64 unpadded": base64.b64encode(data).decode().rstrip("="),
        "url-safe base64": base64.urlsafe_b64encode(data).decode(),
        "base64 reversed": base64.b64encode(data).decode()[::-1],
        "base64 of the reversed": base64.b64encode(secret[::-1].encode()).decode(),
        "quote": urllib.parse.quote(secret, safe=""),
        "quote_plus": urllib.parse.quote_plus(secret),
        "quote, lower hex": "".join(f"%{byte:02x}" for byte in data),
        "JSON escapes": _json_escapes(secret),
        "JSON escapes, upper": _json_escapes(secret, case=str.upper),
        "every third a JSON escape": _json_escapes(secret, every=3),
        "repr's \\x": "".join(f"\\x{byte:02x}" for byte in data),
    }
    # Padding holds nothing of the secret.
    found = {name: (text, text.strip("=")) for name, text in found.items()}
    # Inside a longer encoded text: only the characters made of the secret's bits hold it.
    for prefix in ("Authorization: Bearer ", "Bearer ", "x-api-key: ", "token="):
        whole = f"{prefix}{secret}\r\n".encode()
        fixed = _fixed_base64(data, len(prefix.encode()))
        found[f"base64 of {prefix!r}"] = (base64.b64encode(whole).decode(), fixed)
        found[f"url-safe base64 of {prefix!r}"] = (
            base64.urlsafe_b64encode(whole).decode().rstrip("="),
            fixed.translate(str.maketrans("+/", "-_")))
    return found


def main():
    secret = os.environ["HOSTILE_TOKEN"]
    written = {name: text for name, (text, _) in forms(secret).items()}
    worker.hello()
    worker.ready("hostile", "1.0")
    worker.start()
    worker.emit("agent", "leak", {"forms": written, "keys": {text: 1 for text in written.values()}})
    # A JSON document as text, the secret in it escaped as JSON escapes spell it.
    worker.emit("agent", "document", {"text": json.dumps({"token": written["JSON escapes"]})})
    for index, (name, text) in enumerate(written.items()):
        sys.stderr.write(f"{name}: {text}\n")
        # Names are kept to 128 characters: each form placed across the cut.
        worker.tool_call("n" * (100 + index % 28) + text, {"q": text})
        worker.tool_result("n" * (100 + index % 28) + text, ok=True, output=text)
    worker.fault("p" * 120 + written["hex"])
    sys.stderr.write(" ".join(written.values()) + "\n")
    sys.stderr.flush()
    os.makedirs("lab-output", exist_ok=True)
    with open("lab-output/effects.json", "w") as handle:
        json.dump({"note": "q" * 290 + written["base64"], "forms": written}, handle)
    worker.result(output=" ".join(written.values()), stop_reason="accepted",
                  end_state={name.replace(" ", "_"): text for name, text in written.items()},
                  verification={"checked": "c" * 990 + written["quote"], **written})
    # The last stderr line before a crash is quoted in the detail, cut at 300 characters.
    sys.stderr.write("Traceback (most recent call last):\nRuntimeError: " + "r" * 270
                     + written["url-safe base64"] + "\n")
    sys.stderr.flush()
    os._exit(3)


if __name__ == "__main__":
    main()
