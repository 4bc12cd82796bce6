"""OpenAI's wire formats as the model gateway speaks them, pure (no I/O, nothing here knows
about sockets): a worker's request read (`request`), the reply made (`reply`) and sent in the
format asked (`bodies`, with `chat` for Chat Completions and `responses` for the Responses API),
and an upstream's answer read back (`upstream`).

Two endpoints are spoken, Chat Completions (`chat`: POST /v1/chat/completions) and Responses
(`responses`: POST /v1/responses), each streamed or not. The shapes follow OpenAI's API reference
and what the `openai` Python SDK reads (its `types/chat`, `types/responses` and the stream
accumulators in `lib/streaming`); the unit tests feed every body and stream built here to the real
SDK.
"""
