"""alk worker for the `google-genai` package with no framework: a small agent loop written
directly on Gemini's API, streamed (`client.models.generate_content_stream`): each
`function_call` part is run and answered with a `function_response` part, until the model
answers in text. The client's automatic function calling is off: with it on, the client would
call the Python functions itself and the loop, and what it does with a failing tool, would be
the client's; off, this lane and the anthropic lane's loop are the same loop, and the two
compare the clients alone. Everything below the loop is the client's, with its defaults, and
among them its retries: none (`HttpOptions.retry_options` is unset, and then the client
tries each request once; a lane that wants retries must ask for them, so this one measures what
an application that did not ask gets). Its base URL is the Gemini endpoint of the model alk
serves (`http_options.base_url`; the client reads GOOGLE_GEMINI_BASE_URL when it is not given
one), the lane serving that family only.

alk's gateway plays the scenario's `script` in Gemini's format, injects its `wire_faults` (those
shared by every family, and Gemini's own: 429 RESOURCE_EXHAUSTED with a retryDelay, finish
reasons SAFETY and MAX_TOKENS, an error object inside a 200 stream) and records every call. A
tool that raises is answered with `{"error": text}`, as Google's function-calling guide
advises. The loop reads the parts it is given: an answer with no function call ends the run,
whatever its finish reason says. Whatever the client raises ends the run with stop_reason
`error:<ExceptionType>`.
"""

from importlib.metadata import version

from alk import worker
from lab_tools import (
    ORDER_SCHEMA,
    TOOL_DOCS,
    Faults,
    family_endpoint,
    report_run,
    tool_outcome,
)

worker.hello()
# Imported after hello(): a package that prints on import cannot break the protocol.
from google import genai  # noqa: E402
from google.genai import types  # noqa: E402

MAX_TURNS = 10  # a loop that never ends is cut here, and says so


def run_loop(start, faults):
    name, base_url, api_key = family_endpoint(start, "gemini")
    client = genai.Client(api_key=api_key, http_options=types.HttpOptions(base_url=base_url))
    config = types.GenerateContentConfig(
        tools=[types.Tool(function_declarations=[
            types.FunctionDeclaration(name=tool, description=doc,
                                      parameters_json_schema=ORDER_SCHEMA)
            for tool, doc in TOOL_DOCS.items()])],
        automatic_function_calling=types.AutomaticFunctionCallingConfig(disable=True))
    contents = [types.Content(role="user", parts=[types.Part(text=start.task)])]
    for _ in range(MAX_TURNS):
        parts = [part for chunk in client.models.generate_content_stream(
                     model=name, contents=contents, config=config)
                 for candidate in chunk.candidates or [] if candidate.content
                 for part in candidate.content.parts or []]
        calls = [part.function_call for part in parts if part.function_call]
        if not calls:
            return "".join(part.text or "" for part in parts)
        contents.append(types.Content(role="model", parts=parts))
        answers = []
        for call in calls:
            output, ok = tool_outcome(call.name, dict(call.args or {}), faults)
            answers.append(types.Part(function_response=types.FunctionResponse(
                id=call.id, name=call.name,
                response={"output": output} if ok else {"error": output})))
        contents.append(types.Content(role="user", parts=answers))
    raise RuntimeError(f"no final answer in {MAX_TURNS} model turns")


def main():
    worker.ready("google-genai", version("google-genai"),
                 worker.package_paths("google-genai", "httpx", "httpcore", "tenacity"))
    start = worker.start()
    report_run(lambda: run_loop(start, Faults(start.faults)))


main()
