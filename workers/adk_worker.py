"""alk worker for Google ADK (Agent Development Kit): the framework's own Runner, LLM flow and
tool dispatch, through its default Gemini model: the agent is given a model-name string, which
ADK resolves to its `Gemini` model, and that calls google-genai's client (generateContent,
unstreamed, as ADK's default RunConfig asks) at the base URL and key the environment names.

alk's gateway serves the Gemini API for this lane (`[model] family = "gemini"`) and plays the
scenario's script there, injecting its wire faults and recording every model call. google-genai
reads GOOGLE_GEMINI_BASE_URL and GOOGLE_API_KEY when it is given no base URL or key, so the
worker only makes sure they hold what the start message says (`model.base_urls["gemini"]`,
`model.api_key`) before the agent is built: nothing else is configured, so the client keeps the
defaults an application built the ordinary way gets (ADK asks for no retries). The model name
is the lane's (`[model] name`): ADK's model registry knows `gemini-*` names only.

Tools are plain functions with docstrings, which ADK wraps as FunctionTools; they go through
lab_tools like every lane's. A run is one turn: a session in InMemorySessionService, the task
as the user's message, `Runner.run_async` read to its end; the answer is the final response's
text. A final event that carries an error (e.g. a MALFORMED_FUNCTION_CALL finish) and no text
ends the run as an error of that code: it is what the application is handed. Whatever ADK
raises ends the run with stop_reason `error:<ExceptionType>`.

google-adk pulls in many dependencies, so it runs from its own environment (`.venvs/adk`, see
the lane's `install`). Its OpenTelemetry spans are exported nowhere unless configured;
OTEL_SDK_DISABLED says so to OpenTelemetry too.
"""

import asyncio
import os
from importlib.metadata import version

from alk import worker
from lab_tools import Faults, report_run, run_tool

worker.hello()
os.environ.setdefault("OTEL_SDK_DISABLED", "true")
# Imported after hello(): a framework that prints on import cannot break the protocol.
from google.adk.agents import Agent, RunConfig  # noqa: E402
from google.adk.runners import Runner  # noqa: E402
from google.adk.sessions import InMemorySessionService  # noqa: E402
from google.genai import types  # noqa: E402

# ADK's own bound on model calls in one run (its default is 500).
MAX_MODEL_CALLS = 12
APP, USER = "alk-lab", "alk"


class ModelErrorEvent(Exception):
    """The run's final event carried an error code and no answer."""


def build_agent(start, faults):
    def lookup_order(order: str) -> dict:
        """Look up an order.

        Args:
            order: The order number.
        """
        return run_tool("lookup_order", {"order": order}, faults)

    def write_report(order: str) -> dict:
        """Write the order's report (the side effect).

        Args:
            order: The order number.
        """
        return run_tool("write_report", {"order": order}, faults)

    def delete_records(order: str) -> str:
        """Delete the order's records.

        Args:
            order: The order number.
        """
        return run_tool("delete_records", {"order": order}, faults)

    return Agent(name="orders", model=start.model.get("name") or "gemini-2.5-flash",
                 instruction="Follow the task.",
                 tools=[lookup_order, write_report, delete_records])


def point_client_at_gateway(model):
    """The variables google-genai reads, from the start message (they are already the
    environment's; the start message is what this attempt was given)."""
    base_url = (model.get("base_urls") or {}).get("gemini")
    if base_url:
        os.environ["GOOGLE_GEMINI_BASE_URL"] = base_url
    if model.get("api_key"):
        os.environ["GOOGLE_API_KEY"] = os.environ["GEMINI_API_KEY"] = model["api_key"]
    os.environ["GOOGLE_GENAI_USE_VERTEXAI"] = "false"


async def run_turn(start, faults):
    sessions = InMemorySessionService()
    runner = Runner(app_name=APP, agent=build_agent(start, faults), session_service=sessions)
    session = await sessions.create_session(app_name=APP, user_id=USER)
    message = types.Content(role="user", parts=[types.Part(text=start.task)])
    answer, last = "", None
    async for event in runner.run_async(user_id=USER, session_id=session.id,
                                        new_message=message,
                                        run_config=RunConfig(max_llm_calls=MAX_MODEL_CALLS)):
        last = event
        if event.is_final_response() and event.content and event.content.parts:
            answer += "".join(part.text or "" for part in event.content.parts)
    if not answer and last is not None and last.error_code:
        raise ModelErrorEvent(f"{last.error_code}: {last.error_message or ''}")
    return answer


def main():
    worker.ready("google-adk", version("google-adk"),
                 worker.package_paths("google-adk", "google-genai"))
    start = worker.start()
    point_client_at_gateway(start.model)
    faults = Faults(start.faults)
    report_run(lambda: asyncio.run(run_turn(start, faults)))


main()
