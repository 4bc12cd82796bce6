"""A tiny agent framework for alk's tests, shaped where it matters like smolagents: its loop asks
the model for a step until a final answer, wraps what the model raises in an error whose message
has two lines, chained to the cause, and can retry a failing model after a sleep, forever."""

import time


class AgentGenerationError(Exception):
    """The model failed while generating the agent's next step."""


class Agent:
    def __init__(self, model, tools, retry_s=None, max_steps=10):
        self.model, self.tools, self.retry_s, self.max_steps = model, tools, retry_s, max_steps

    def run(self, task):
        messages = [{"role": "user", "content": task}]
        for _ in range(self.max_steps):
            step = self._generate(messages)
            if "final" in step:
                return step["final"]
            output = self.tools[step["tool"]](**step.get("args", {}))
            messages.append({"role": "tool", "content": output})
        return "(max steps reached)"

    def _generate(self, messages):
        while True:
            try:
                return self.model(messages)
            except Exception as exc:
                if self.retry_s is None:
                    raise AgentGenerationError(f"Error while generating output:\n{exc}") from exc
            time.sleep(self.retry_s)
