"""The model gateway: alk serves the model a worker talks to, and sees every call itself.

`server` runs the gateway (a thread with an event loop); each attempt of a repeat gets a
`session`, which answers from the scenario's `script`, from a `cassette` (replay) or through
the `proxy` to a provider, injects the scenario's `faults`, and records every call. `wire` is
OpenAI's formats; `http` what the answers are made of.
"""
