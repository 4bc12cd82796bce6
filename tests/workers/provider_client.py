"""A worker that is nothing but a provider's own client, built from the environment alone, driving
a tool loop against alk's gateway: the `openai` package (OPENAI_BASE_URL, OPENAI_API_KEY), the
`anthropic` package (ANTHROPIC_BASE_URL, ANTHROPIC_API_KEY) or `google-genai`
(GOOGLE_GEMINI_BASE_URL, GOOGLE_API_KEY). The scenario's input picks the endpoint (`api`:
"chat", "responses", "messages" or "gemini") and `stream`; `retries` sets the client's
retries, `timeout_s` its timeout; `claim_turns` makes it report that many model turns of
its own (which alk's gateway never served); `scan` (a regular expression) makes it look for a
match in everything it can read — its environment, the files under its workspace, /tmp and /proc
it may open, and its own memory — and write what it found to lab-output/scan.json, with, as the
scan's own control, whether it found its OPENAI_API_KEY in its memory. `durable` keeps the
conversation in the workspace after each tool result, and a resumed attempt goes on from it. Tools: `lookup_order` and `write_report` (which appends to
lab-output/effects.json)."""

import json
import os
import sys

from alk import worker

worker.hello()
import openai  # noqa: E402

worker.ready("openai-client", openai.__version__)
start = worker.start()
options = start.input
client = openai.OpenAI(max_retries=options.get("retries", 2),
                       timeout=options.get("timeout_s", 5.0))
model = start.model.get("name", "alk-script")
TOOLS = ["lookup_order", "write_report"]
SCHEMA = {"type": "object", "properties": {"order": {"type": "string"}}}


def run_tool(name, args):
    worker.tool_call(name, args)
    if name == "write_report":
        os.makedirs("lab-output", exist_ok=True)
        path = os.path.join("lab-output", "effects.json")
        effects = json.load(open(path)) if os.path.exists(path) else []
        effects.append({"order": args.get("order")})
        json.dump(effects, open(path, "w"))
    worker.tool_result(name, ok=True, output={"order": args.get("order")})
    return json.dumps({"ok": True})


def chat():
    tools = [{"type": "function", "function": {"name": n, "parameters": {
        "type": "object", "properties": {"order": {"type": "string"}}}}} for n in TOOLS]
    messages = [{"role": "user", "content": start.task}]
    saved = os.path.join("lab-output", "conversation.json")
    if options.get("durable") and start.resume and os.path.exists(saved):
        with open(saved) as handle:
            messages = json.load(handle)
    for _ in range(8):
        if options.get("stream"):
            stream = client.chat.completions.create(model=model, messages=messages,
                                                    tools=tools, stream=True)
            text, calls = "", {}
            for chunk in stream:
                if not chunk.choices:
                    continue
                delta = chunk.choices[0].delta
                text += delta.content or ""
                for call in delta.tool_calls or []:
                    entry = calls.setdefault(call.index, {"id": "", "name": "", "args": ""})
                    entry["id"] = call.id or entry["id"]
                    entry["name"] = (call.function and call.function.name) or entry["name"]
                    entry["args"] += (call.function and call.function.arguments) or ""
            tool_calls = [(c["id"], c["name"], c["args"]) for c in calls.values()]
        else:
            answer = client.chat.completions.create(model=model, messages=messages,
                                                    tools=tools)
            message = answer.choices[0].message
            text = message.content or ""
            tool_calls = [(c.id, c.function.name, c.function.arguments)
                          for c in message.tool_calls or []]
        if not tool_calls:
            return text
        messages.append({"role": "assistant", "content": None, "tool_calls": [
            {"id": i, "type": "function", "function": {"name": n, "arguments": a}}
            for i, n, a in tool_calls]})
        for call_id, name, arguments in tool_calls:
            messages.append({"role": "tool", "tool_call_id": call_id,
                             "content": run_tool(name, json.loads(arguments))})
            if options.get("durable"):
                os.makedirs("lab-output", exist_ok=True)
                with open(saved, "w") as handle:
                    json.dump(messages, handle)
                worker.emit("agent", "checkpoint", {"name": name})  # a kill_at may follow
    return "too many turns"


def responses():
    tools = [{"type": "function", "name": n, "parameters": {
        "type": "object", "properties": {"order": {"type": "string"}}}} for n in TOOLS]
    items = [{"role": "user", "content": start.task}]
    for _ in range(8):
        if options.get("stream"):
            with client.responses.stream(model=model, input=items, tools=tools) as stream:
                for _event in stream:
                    pass
                answer = stream.get_final_response()
        else:
            answer = client.responses.create(model=model, input=items, tools=tools)
        calls = [item for item in answer.output if item.type == "function_call"]
        if not calls:
            return answer.output_text
        for call in calls:
            items.append({"type": "function_call", "call_id": call.call_id, "name": call.name,
                          "arguments": call.arguments})
            items.append({"type": "function_call_output", "call_id": call.call_id,
                          "output": run_tool(call.name, json.loads(call.arguments))})
    return "too many turns"


def messages():
    """Anthropic's Messages API through the `anthropic` client: tool_use blocks answered with
    tool_result blocks until the model ends its turn."""
    import anthropic

    claude = anthropic.Anthropic(max_retries=options.get("retries", 2),
                                 timeout=options.get("timeout_s", 5.0))
    tools = [{"name": n, "description": n, "input_schema": SCHEMA} for n in TOOLS]
    conversation = [{"role": "user", "content": start.task}]
    for _ in range(8):
        asked = dict(model=model, max_tokens=1024, messages=conversation, tools=tools)
        if options.get("stream"):
            with claude.messages.stream(**asked) as stream:
                answer = stream.get_final_message()
        else:
            answer = claude.messages.create(**asked)
        calls = [block for block in answer.content if block.type == "tool_use"]
        if not calls:
            return "".join(block.text for block in answer.content if block.type == "text")
        conversation.append({"role": "assistant",
                             "content": [block.model_dump() for block in answer.content]})
        conversation.append({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": call.id,
             "content": run_tool(call.name, call.input)} for call in calls]})
    return "too many turns"


def gemini():
    """Gemini's generateContent through `google-genai`, its automatic function calling off:
    function calls answered with function responses until the model answers in text."""
    from google import genai
    from google.genai import types

    retries = options.get("retries", 2)
    gemini_client = genai.Client(http_options=types.HttpOptions(
        timeout=int(options.get("timeout_s", 5.0) * 1000),
        retry_options=types.HttpRetryOptions(attempts=retries + 1) if retries else None))
    config = types.GenerateContentConfig(
        tools=[types.Tool(function_declarations=[
            types.FunctionDeclaration(name=n, description=n, parameters_json_schema=SCHEMA)
            for n in TOOLS])],
        automatic_function_calling=types.AutomaticFunctionCallingConfig(disable=True))
    contents = [types.Content(role="user", parts=[types.Part(text=start.task)])]
    for _ in range(8):
        if options.get("stream"):
            parts = [part for chunk in gemini_client.models.generate_content_stream(
                model=model, contents=contents, config=config)
                for candidate in chunk.candidates or [] if candidate.content
                for part in candidate.content.parts or []]
        else:
            answer = gemini_client.models.generate_content(model=model, contents=contents,
                                                           config=config)
            candidate = (answer.candidates or [None])[0]
            parts = list(candidate.content.parts or []) if candidate and candidate.content \
                else []
        calls = [part.function_call for part in parts if part.function_call]
        if not calls:
            return "".join(part.text or "" for part in parts)
        contents.append(types.Content(role="model", parts=parts))
        contents.append(types.Content(role="user", parts=[
            types.Part(function_response=types.FunctionResponse(
                id=call.id, name=call.name,
                response=json.loads(run_tool(call.name, dict(call.args or {})))))
            for call in calls]))
    return "too many turns"


ENDPOINTS = {"chat": chat, "responses": responses, "messages": messages, "gemini": gemini}


def scan(pattern):
    import re

    found, wanted = [], re.compile(pattern.encode())
    key = os.environ.get("OPENAI_API_KEY", "").encode()
    if wanted.search("\0".join(f"{k}={v}" for k, v in os.environ.items()).encode()):
        found.append("environment")
    # Python installations (this one, and any virtual environment) are left out: they hold no
    # key, and when the checkout lies under /tmp the sandbox shows its environments there,
    # gigabytes of them, more than a repeat's timeout to read.
    installed = tuple({os.path.realpath(p) + os.sep for p in (sys.prefix, sys.base_prefix)})
    for top in (os.getcwd(), "/tmp", "/proc/self", "/proc/1"):
        for folder, subfolders, names in os.walk(top):
            if folder.startswith("/proc/") and folder.count("/") > 3:
                continue
            subfolders[:] = [d for d in subfolders if not (
                os.path.realpath(os.path.join(folder, d)) + os.sep).startswith(installed)
                and not os.path.isfile(os.path.join(folder, d, "pyvenv.cfg"))]
            for name in names:
                try:
                    with open(os.path.join(folder, name), "rb") as handle:
                        if wanted.search(handle.read(4 * 1024 * 1024)):
                            found.append(os.path.join(folder, name))
                except OSError:
                    pass
    key_seen = False
    with open("/proc/self/maps") as maps, open("/proc/self/mem", "rb", 0) as mem:
        for line in maps:
            span, perms = line.split()[:2]
            if not perms.startswith("r"):
                continue
            low, high = (int(x, 16) for x in span.split("-"))
            try:
                mem.seek(low)
                data = mem.read(high - low)
            except (OSError, ValueError, OverflowError):
                continue
            if wanted.search(data):
                found.append(f"memory {span}")
            key_seen = key_seen or key in data
    os.makedirs("lab-output", exist_ok=True)
    with open(os.path.join("lab-output", "scan.json"), "w") as handle:
        json.dump({"found": found, "own_key_in_memory": key_seen}, handle)


for index in range(options.get("claim_turns", 0)):
    worker.emit("model", "turn", {"index": index})
try:
    output = ENDPOINTS[options.get("api", "chat")]()
    if options.get("scan"):
        scan(options["scan"])  # after the calls: whatever they brought back is in memory
    worker.result(output=output, stop_reason="accepted", end_state={"phase": "stopped"})
except Exception as exc:
    print(f"{type(exc).__name__}: {exc}", file=sys.stderr)
    worker.result(output=str(exc)[:300], stop_reason=f"error:{type(exc).__name__}",
                  end_state={"phase": "error"})
