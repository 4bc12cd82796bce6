"""A worker whose tools are alk's, over MCP: the `openai` package drives the model's tool loop
against alk's gateway, and the official `mcp` client lists and calls the tools at ALK_MCP_URL
(the start message's `tools`), with the attempt's key. A call that fails or times out
(`input.tool_timeout_s`) is handed back to the model as the call's result, as frameworks do.
`input.report` makes it report tool calls of its own on the tool channel: "all" as it makes
them, "extra" one alk never served beside them."""

import asyncio
import json
from importlib import metadata

from alk import worker

worker.hello()
import openai  # noqa: E402
from mcp.client.session import ClientSession  # noqa: E402
from mcp.client.streamable_http import streamable_http_client  # noqa: E402

worker.ready("mcp-client", metadata.version("mcp"))
start = worker.start()
options = start.input
tools_at = start.tools
client = openai.OpenAI(max_retries=0, timeout=10.0)


async def main():
    import httpx2

    headers = tools_at["headers"]
    async with httpx2.AsyncClient(headers=headers, timeout=30) as http, \
            streamable_http_client(tools_at["url"], http_client=http) as streams, \
            ClientSession(streams[0], streams[1]) as session:
        await session.initialize()
        listed = await session.list_tools()
        tools = [{"type": "function", "function": {"name": t.name, "description": t.description,
                                                    "parameters": t.input_schema}}
                 for t in listed.tools]
        messages = [{"role": "user", "content": start.task}]
        for _ in range(8):
            answer = client.chat.completions.create(model="alk-script", messages=messages,
                                                    tools=tools)
            message = answer.choices[0].message
            if not message.tool_calls:
                return message.content or ""
            messages.append(message.model_dump(exclude_none=True))
            for call in message.tool_calls:
                args = json.loads(call.function.arguments or "{}")
                if options.get("report") in ("all", "extra"):
                    worker.tool_call(call.function.name, args)
                try:
                    result = await session.call_tool(
                        call.function.name, args,
                        read_timeout_seconds=options.get("tool_timeout_s", 5))
                    text = "".join(getattr(c, "text", "") for c in result.content)
                    ok = not result.is_error
                except Exception as exc:  # noqa: BLE001 - the model is told, as frameworks do
                    text, ok = f"{type(exc).__name__}: {exc}", False
                if options.get("report") in ("all", "extra"):
                    worker.tool_result(call.function.name, ok=ok, output=text)
                messages.append({"role": "tool", "tool_call_id": call.id, "content": text})
        return "(too many turns)"


try:
    output, stop = asyncio.run(main()), "accepted"
except Exception as exc:  # noqa: BLE001 - what went wrong is the result
    output, stop = f"{type(exc).__name__}: {exc}", f"error:{type(exc).__name__}"
if options.get("report") == "extra":
    worker.tool_call("write_report", {"order": "never served"})
    worker.tool_result("write_report", ok=True, output="done")
worker.result(output=output, stop_reason=stop, end_state={"phase": "stopped"})
