"""A scripted model behind the OpenAI Chat Completions API, on 127.0.0.1, for the agent
apps whose model extension point is an OpenAI client (the OpenAI Agents SDK, smolagents'
`OpenAIServerModel`, the plain `openai` client under the official instrumentation).

The script is an agent's two turns: while no knowledge-base text is in the conversation
it calls the first tool offered (other than `final_answer`) with the user's question;
once the tool's result is in, it answers by `planted_answer` — as text, or as a
`final_answer` tool call when that tool is offered (smolagents' agents end that way).
A request with `"stream": true` gets the same reply as server-sent chunks, as the API
streams it; a Gemini API `generateContent` request (the Google Gen AI SDK's) gets the answer
as a Gemini response, an Anthropic Messages API request (`/v1/messages`) as a Messages
response. For apps in other languages, `GET /kb/search?query=...` answers the knowledge
base's ranking (`tests/frameworks/apps/framework_apps.search`: `[{"id", "content"}]`) and
`GET /kb/questions` the questions, and `POST /v1/embeddings` each text's
`framework_apps.embed` vector, so that every app's tool or vector store ranks the same way."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

from tests.frameworks.apps.framework_apps import KB, QUESTIONS, embed, planted_answer, search


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return ""


def reply(body: dict[str, Any], answer: Callable[[str], str] = planted_answer) -> dict[str, Any]:
    """The chat completion for one request body; `answer`: what the model says to a prompt
    once the documents are in it."""
    messages = body.get("messages", [])
    prompt = "\n".join(_text(m.get("content")) for m in messages)
    users = [_text(m.get("content")) for m in messages if m.get("role") == "user"]
    tools = [t["function"]["name"] for t in body.get("tools") or [] if "function" in t]
    message: dict[str, Any] = {"role": "assistant", "content": None}
    retrieved = any(text in prompt for text in KB.values())
    search = [t for t in tools if t != "final_answer"]
    if not retrieved and search:
        question = users[-1].strip() if users else ""
        call = {"name": search[0], "arguments": json.dumps({"query": question})}
        message["tool_calls"] = [{"id": "call_search", "type": "function", "function": call}]
    elif "final_answer" in tools:
        call = {"name": "final_answer", "arguments": json.dumps({"answer": answer(prompt)})}
        message["tool_calls"] = [{"id": "call_final", "type": "function", "function": call}]
    else:
        message["content"] = answer(prompt)
    return {
        "id": "chatcmpl-scripted",
        "object": "chat.completion",
        "created": 0,
        "model": body.get("model", "scripted"),
        "choices": [
            {
                "index": 0,
                "message": message,
                "finish_reason": "tool_calls" if "tool_calls" in message else "stop",
            }
        ],
        "usage": {"prompt_tokens": len(prompt.split()), "completion_tokens": 8, "total_tokens": 0},
    }


def chunks(completion: dict[str, Any]) -> list[dict[str, Any]]:
    """A completion as the API streams it: the role, the text or each tool call, the
    finish reason, then the usage (what `stream_options.include_usage` asks for)."""
    choice = completion["choices"][0]
    message = choice["message"]
    base = {k: completion[k] for k in ("id", "created", "model")}
    base["object"] = "chat.completion.chunk"
    deltas: list[dict[str, Any]] = [{"role": "assistant", "content": ""}]
    if message.get("content"):
        deltas.append({"content": message["content"]})
    for i, call in enumerate(message.get("tool_calls") or []):
        deltas.append({"tool_calls": [{"index": i, **call}]})
    out = [{**base, "choices": [{"index": 0, "delta": d, "finish_reason": None}]} for d in deltas]
    out.append(
        {**base, "choices": [{"index": 0, "delta": {}, "finish_reason": choice["finish_reason"]}]}
    )
    out.append({**base, "choices": [], "usage": completion["usage"]})
    return out


def gemini_reply(body: dict[str, Any], answer: Callable[[str], str]) -> dict[str, Any]:
    """The Gemini API's `generateContent` response to one request body (the Google Gen AI
    SDK's model calls): the answer to its system instruction and contents."""
    instruction = body.get("systemInstruction") or body.get("system_instruction") or {}
    parts = [
        *instruction.get("parts", []),
        *(p for c in body.get("contents", []) for p in c.get("parts", [])),
    ]
    prompt = "\n".join(str(p.get("text", "")) for p in parts if isinstance(p, dict))
    tokens = len(prompt.split())
    return {
        "candidates": [
            {
                "content": {"role": "model", "parts": [{"text": answer(prompt)}]},
                "finishReason": "STOP",
                "index": 0,
            }
        ],
        "usageMetadata": {
            "promptTokenCount": tokens,
            "candidatesTokenCount": 8,
            "totalTokenCount": tokens + 8,
        },
        "modelVersion": "scripted",
    }


def _all_text(value: Any) -> list[str]:
    """Every string under a `text` or `data` key of a Messages API body, at any depth (text
    blocks, `search_result` content, a `document`'s source): what the model reads."""
    if isinstance(value, list):
        return [t for item in value for t in _all_text(item)]
    if not isinstance(value, dict):
        return []
    own = [v for k, v in value.items() if k in ("text", "data") and isinstance(v, str)]
    return own + [t for v in value.values() if isinstance(v, list | dict) for t in _all_text(v)]


def anthropic_reply(body: dict[str, Any], answer: Callable[[str], str]) -> dict[str, Any]:
    """The Anthropic Messages API's response to one request body: the answer to its system
    prompt and every text its messages' blocks hold."""
    system = body.get("system")
    texts = [system] if isinstance(system, str) else _all_text(system)
    prompt = "\n".join([*texts, *_all_text(body.get("messages", []))])
    return {
        "id": "msg_scripted",
        "type": "message",
        "role": "assistant",
        "model": body.get("model", "scripted"),
        "content": [{"type": "text", "text": answer(prompt)}],
        "stop_reason": "end_turn",
        "stop_sequence": None,
        "usage": {"input_tokens": len(prompt.split()), "output_tokens": 8},
    }


def embeddings(body: dict[str, Any]) -> dict[str, Any]:
    """An Embeddings API response: each input's `framework_apps.embed` vector, so that an
    app's own vector store ranks as `framework_apps.search` does, and the usage."""
    texts = body.get("input", [])
    texts = [texts] if isinstance(texts, str) else texts
    data = [
        {"object": "embedding", "index": i, "embedding": embed(str(t))} for i, t in enumerate(texts)
    ]
    tokens = sum(len(str(t).split()) for t in texts)
    usage = {"prompt_tokens": tokens, "total_tokens": tokens}  # the OpenAI Java SDK wants it
    return {"object": "list", "data": data, "model": body.get("model", "scripted"), "usage": usage}


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def _body(self) -> bytes:
        """The request's body, by its length or, as the JDK's HTTP client sends a body of a
        length it does not know, in chunks (each a hexadecimal size line, then that many
        bytes and a line end, the last of size 0 followed by trailer lines)."""
        if "chunked" not in self.headers.get("Transfer-Encoding", "").lower():
            return self.rfile.read(int(self.headers.get("Content-Length", 0)))
        data = bytearray()
        while True:
            size = int(self.rfile.readline().split(b";")[0].strip(), 16)
            if size == 0:
                while self.rfile.readline().strip():
                    pass  # trailers
                return bytes(data)
            data += self.rfile.read(size)
            self.rfile.readline()

    def do_POST(self) -> None:
        body = json.loads(self._body())
        assert isinstance(self.server, _Server)
        if urlsplit(self.path).path.endswith(":generateContent"):
            gemini = gemini_reply(body, self.server.answer)
            self._send("application/json", json.dumps(gemini).encode())
            return
        if urlsplit(self.path).path.endswith("/messages"):
            reply_body = anthropic_reply(body, self.server.answer)
            self._send("application/json", json.dumps(reply_body).encode())
            return
        if urlsplit(self.path).path.endswith("/embeddings"):
            self._send("application/json", json.dumps(embeddings(body)).encode())
            return
        if not self.path.endswith("/chat/completions"):
            self.send_error(404, f"only chat completions are scripted, not {self.path}")
            return
        completion = reply(body, self.server.answer)
        if not body.get("stream"):
            self._send("application/json", json.dumps(completion).encode())
            return
        events = [f"data: {json.dumps(c)}\n\n" for c in chunks(completion)]
        self._send("text/event-stream", "".join([*events, "data: [DONE]\n\n"]).encode())

    def do_GET(self) -> None:
        url = urlsplit(self.path)
        if url.path.endswith("/kb/search"):
            query = parse_qs(url.query).get("query", [""])[0]
            found = [{"id": uri, "content": KB[uri]} for uri in search(query)]
            self._send("application/json", json.dumps(found).encode())
        elif url.path.endswith("/kb/questions"):
            self._send("application/json", json.dumps([q for q, _ in QUESTIONS]).encode())
        else:
            self.send_error(404, f"not scripted: {self.path}")

    def _send(self, content_type: str, data: bytes) -> None:
        self.send_response(200)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        pass


class _Server(ThreadingHTTPServer):
    def __init__(self, answer: Callable[[str], str]) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.answer = answer


def serve(answer: Callable[[str], str] = planted_answer) -> str:
    """Start the server in a daemon thread, the model saying `answer(prompt)` once the
    documents are in the prompt; its base URL (`http://127.0.0.1:PORT/v1`)."""
    server = _Server(answer)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return f"http://127.0.0.1:{server.server_address[1]}/v1"
