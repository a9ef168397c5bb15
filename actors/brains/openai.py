"""A brain on any OpenAI-compatible server (vllm serve, llama_cpp.server, ...), with json_schema response_format."""

from __future__ import annotations

import asyncio
import json
import os
import urllib.error
import urllib.request
from collections.abc import Mapping
from typing import Any

from swarmlog.actors.brains import TEMPERATURE, Generation
from swarmlog.errors import ServiceError

TIMEOUT_S = 120
JSON_SCHEMA = "json_schema"
JSON_OBJECT = "json_object"


class OpenAIBrain:
    """Chat completions over HTTP (stdlib urllib, in a worker thread) at base_url."""

    def __init__(self, model: str, base_url: str, api_key: str | None = None, seed: int = 0) -> None:
        self.model = model
        self._seed = seed
        self._style = JSON_SCHEMA
        self._url = base_url.rstrip("/") + "/chat/completions"
        self._headers = {"Content-Type": "application/json"} | (
            {"Authorization": f"Bearer {api_key}"} if api_key else {}
        )

    async def generate(self, prompt: str, json_schema: Mapping[str, Any], max_tokens: int) -> Generation:
        """One chat completion constrained to json_schema by the server."""
        body = {
            "model": self.model,
            "messages": [{"role": "user", "content": prompt}],
            "max_tokens": max_tokens,
            "temperature": TEMPERATURE,
            "seed": self._seed,
            "response_format": _response_format(self._style, json_schema),
        }
        try:
            reply = await asyncio.to_thread(self._post, body)
        except urllib.error.HTTPError as exc:
            if self._style != JSON_SCHEMA or exc.code not in (400, 422, 500):
                raise ServiceError(f"the model server at {self._url} refused the request: {exc}") from exc
            # llama.cpp's server knows only {"type": "json_object", "schema": ...}; vLLM and OpenAI take both.
            self._style = JSON_OBJECT
            return await self.generate(prompt, json_schema, max_tokens)
        usage = reply.get("usage") or {}
        return Generation(
            reply["choices"][0]["message"]["content"] or "",
            usage.get("prompt_tokens", 0),
            usage.get("completion_tokens", 0),
            temperature=TEMPERATURE,
            seed=self._seed,
        )

    def _post(self, body: dict[str, Any]) -> dict[str, Any]:
        request = urllib.request.Request(self._url, json.dumps(body).encode(), self._headers)
        try:
            with urllib.request.urlopen(request, timeout=TIMEOUT_S) as response:
                reply: dict[str, Any] = json.load(response)
                return reply
        except urllib.error.HTTPError:
            raise
        except (urllib.error.URLError, TimeoutError) as exc:
            raise ServiceError(f"the model server at {self._url} did not answer: {exc}; check OPENAI_BASE_URL") from exc

    def close(self) -> None:
        """Nothing held between calls."""


def _response_format(style: str, json_schema: Mapping[str, Any]) -> dict[str, Any]:
    """The OpenAI response_format constraining output to json_schema, in the style the server understands."""
    if style == JSON_OBJECT:
        return {"type": JSON_OBJECT, "schema": dict(json_schema)}
    return {"type": JSON_SCHEMA, "json_schema": {"name": "action", "schema": dict(json_schema), "strict": True}}


def open(model: str | None, gpu: int | None, seed: int = 0) -> OpenAIBrain:
    """The server at $OPENAI_BASE_URL (default http://localhost:8000/v1) serving `model` ($OPENAI_API_KEY if set)."""
    return OpenAIBrain(
        model or "default",
        os.environ.get("OPENAI_BASE_URL", "http://localhost:8000/v1"),
        os.environ.get("OPENAI_API_KEY"),
        seed,
    )
