"""An MCP server (stdio) with one tool, `search_docs`, that returns the two knowledge-base
documents `search` ranks first as two text parts, each holding a JSON object
`{"id", "content"}` — the shape whose ids a monitor must keep. Run as
`python -m tests.frameworks.apps.mcp_kb_server` (the MCP client starts it)."""

from __future__ import annotations

import json

from mcp.server.mcpserver import MCPServer
from mcp.types import TextContent

from tests.frameworks.apps.framework_apps import KB, search

server = MCPServer("kb")


@server.tool()
def search_docs(query: str) -> list[TextContent]:
    """Search the knowledge base."""
    return [
        TextContent(type="text", text=json.dumps({"id": uri, "content": KB[uri]}))
        for uri in search(query)
    ]


if __name__ == "__main__":
    server.run("stdio")
