"""A scripted model behind the OpenAI Chat Completions API, on 127.0.0.1, for the agent
apps whose model extension point is an OpenAI client (the OpenAI Agents SDK, smolagents'
`OpenAIServerModel`, the plain `openai` client under the official instrumentation).

The script is an agent's two turns: while no knowledge-base text is in the conversation
it calls the first tool offered (other than `final_answer`) with the user's question;
once the tool's result is in, it answers by `planted_answer` — as text, or as a
`final_answer` tool call when that tool is offered (smolagents' agents end that way)."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from tests._framework_apps import KB, planted_answer


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return ""


def reply(body: dict[str, Any]) -> dict[str, Any]:
    """The chat completion for one request body."""
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
        call = {"name": "final_answer", "arguments": json.dumps({"answer": planted_answer(prompt)})}
        message["tool_calls"] = [{"id": "call_final", "type": "function", "function": call}]
    else:
        message["content"] = planted_answer(prompt)
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


class _Handler(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
        if not self.path.endswith("/chat/completions"):
            self.send_error(404, f"only chat completions are scripted, not {self.path}")
            return
        data = json.dumps(reply(body)).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        pass


def serve() -> str:
    """Start the server in a daemon thread; its base URL (`http://127.0.0.1:PORT/v1`)."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return f"http://127.0.0.1:{server.server_address[1]}/v1"
