"""The native message part shapes the shipped entries carry (`_parts.py` says what a shape
is): the GenAI schema's own parts, and each provider's or framework's blocks as its SDK
writes them into the messages an instrumentation records. Several entries may name the
same type value or key; a part is read by the first of them whose fields it holds."""

from __future__ import annotations

from monitor.conventions._parts import (
    BLOB,
    DOCUMENT,
    FILE,
    GENERIC,
    REASONING,
    SERVER_TOOL_CALL,
    SERVER_TOOL_CALL_RESPONSE,
    TEXT_PART,
    TOOL_CALL,
    TOOL_CALL_RESPONSE,
    URI,
    PartShape,
    keyed,
    shape,
)

# The OpenTelemetry GenAI input/output message schemas' parts.
GENAI_PARTS: tuple[PartShape, ...] = (
    shape(TEXT_PART, "text", text=("content",)),
    shape(TOOL_CALL, "tool_call", id=("id",), name=("name",), arguments=("arguments",)),
    shape(
        TOOL_CALL_RESPONSE,
        "tool_call_response",
        id=("id",),
        response=("response", "result"),
        name=("name",),
    ),
    shape(
        SERVER_TOOL_CALL,
        "server_tool_call",
        id=("id",),
        name=("name",),
        arguments=("server_tool_call",),
    ),
    shape(
        SERVER_TOOL_CALL_RESPONSE,
        "server_tool_call_response",
        id=("id",),
        response=("server_tool_call_response",),
    ),
    shape(
        BLOB,
        "blob",
        data=("content",),
        mime_type=("mime_type",),
        modality_at=("modality",),
        name=("name", "filename"),
    ),
    shape(
        FILE,
        "file",
        file_id=("file_id",),
        mime_type=("mime_type",),
        modality_at=("modality",),
        name=("name", "filename"),
        text=("text",),
    ),
    shape(URI, "uri", uri=("uri",), mime_type=("mime_type",), modality_at=("modality",)),
    shape(REASONING, "reasoning", text=("content",)),
    # `generic_type` names what it is; a shape of that type name reads it first.
    shape(
        GENERIC,
        "generic",
        generic_type=("generic_type",),
        text=("content", "text"),
        name=("source", "uri", "name", "id"),
        title=("title",),
        modality_at=("modality",),
    ),
)

OPENAI_PARTS: tuple[PartShape, ...] = (
    shape(TEXT_PART, "text", "input_text", "output_text", "refusal", text=("text", "refusal")),
    shape(URI, "image_url", uri=("image_url.url", "image_url"), modality="image"),
    shape(URI, "input_image", uri=("image_url",), file_id=("file_id",), modality="image"),
    shape(
        BLOB,
        "input_audio",
        data=("input_audio.data",),
        mime_type=("input_audio.format",),
        modality="audio",
    ),
    shape(
        FILE,
        "file",
        data=("file.file_data",),
        file_id=("file.file_id",),
        name=("file.filename",),
    ),
    shape(
        FILE,
        "input_file",
        data=("file_data",),
        file_id=("file_id",),
        uri=("file_url",),
        name=("filename",),
    ),
    shape(
        TOOL_CALL,
        "function_call",
        id=("call_id", "id"),
        name=("name",),
        arguments=("arguments",),
    ),
    shape(TOOL_CALL_RESPONSE, "function_call_output", id=("call_id",), response=("output",)),
    # A hosted file search: its results (when the app asked for them) are documents.
    shape(
        SERVER_TOOL_CALL_RESPONSE,
        "file_search_call",
        id=("id",),
        response=("results",),
        items="results",
        text=("text", "content"),
        name=("filename", "file_id"),
        score=("score",),
    ),
    shape(
        SERVER_TOOL_CALL, "web_search_call", "computer_call", "code_interpreter_call", id=("id",)
    ),
    shape(SERVER_TOOL_CALL, "mcp_call", id=("id",), name=("name",), arguments=("arguments",)),
    shape(REASONING, "reasoning", text=("summary",)),
)

ANTHROPIC_PARTS: tuple[PartShape, ...] = (
    shape(TEXT_PART, "text", text=("text",)),
    shape(
        BLOB,
        "image",
        data=("source.data",),
        uri=("source.url",),
        mime_type=("source.media_type",),
        modality="image",
    ),
    # `source`: `{type: text, data}`, `{type: content, content: [...]}`, `{type: base64,
    # data}` (a PDF, or text sent so), `{type: url, url}`, `{type: file, file_id}`.
    shape(
        BLOB,
        "document",
        modality=DOCUMENT,
        text=("source.content", "content", "text"),
        data=("source.data",),
        mime_type=("source.media_type",),
        uri=("source.url",),
        file_id=("source.file_id",),
        name=("title", "name", "id"),
        title=("title",),
    ),
    shape(
        GENERIC,
        "search_result",
        modality=DOCUMENT,
        text=("content",),
        name=("source", "title"),
        title=("title",),
    ),
    shape(TOOL_CALL, "tool_use", id=("id",), name=("name",), arguments=("input",)),
    shape(TOOL_CALL_RESPONSE, "tool_result", id=("tool_use_id",), response=("content",)),
    shape(
        SERVER_TOOL_CALL,
        "server_tool_use",
        "mcp_tool_use",
        id=("id",),
        name=("name",),
        arguments=("input",),
    ),
    shape(
        SERVER_TOOL_CALL_RESPONSE,
        "web_search_tool_result",
        "mcp_tool_result",
        "code_execution_tool_result",
        id=("tool_use_id",),
        response=("content",),
    ),
    shape(REASONING, "thinking", "redacted_thinking", text=("thinking",)),
)

# Bedrock Converse's content blocks are keyed by their kind; bytes arrive as base64 or hex
# (as the botocore instrumentation's log events write them).
BEDROCK_PARTS: tuple[PartShape, ...] = (
    keyed(TEXT_PART, "text"),
    keyed(
        BLOB,
        "document",
        modality=DOCUMENT,
        name=("name",),
        mime_type=("format",),
        text=("source.text", "source.content"),
        data=("source.bytes",),
        uri=("source.s3Location.uri",),
    ),
    keyed(BLOB, "image", data=("source.bytes",), mime_type=("format",), modality="image"),
    keyed(BLOB, "video", data=("source.bytes",), mime_type=("format",), modality="video"),
    keyed(TOOL_CALL, "toolUse", id=("toolUseId",), name=("name",), arguments=("input",)),
    keyed(TOOL_CALL_RESPONSE, "toolResult", id=("toolUseId",), response=("content",)),
    keyed(REASONING, "reasoningContent", text=("reasoningText.text",)),
    # An answer with citations: its text is the answer, the citations point into documents.
    keyed(TEXT_PART, "citationsContent", text=("content",)),
    keyed(TEXT_PART, "guardContent", text=("text.text",)),
    keyed(
        GENERIC,
        "searchResult",
        modality=DOCUMENT,
        text=("content",),
        name=("source", "title"),
        title=("title",),
    ),
)

# Gemini's parts, keyed too (the REST API's camelCase, the Python SDK's snake_case).
GEMINI_PARTS: tuple[PartShape, ...] = (
    keyed(TEXT_PART, "text"),
    *(
        keyed(BLOB, key, data=("data",), mime_type=("mimeType", "mime_type"), name=("displayName",))
        for key in ("inlineData", "inline_data")
    ),
    *(
        keyed(URI, key, uri=("fileUri", "file_uri"), mime_type=("mimeType", "mime_type"))
        for key in ("fileData", "file_data")
    ),
    *(
        keyed(TOOL_CALL, key, id=("id",), name=("name",), arguments=("args",))
        for key in ("functionCall", "function_call")
    ),
    *(
        keyed(TOOL_CALL_RESPONSE, key, id=("id",), response=("response",), name=("name",))
        for key in ("functionResponse", "function_response")
    ),
    *(keyed(SERVER_TOOL_CALL, key) for key in ("executableCode", "executable_code")),
    *(
        keyed(SERVER_TOOL_CALL_RESPONSE, key, response=("output",))
        for key in ("codeExecutionResult", "code_execution_result")
    ),
)

# Cohere's v2 document content (`{"type": "document", "document": {"id", "data"}}`).
COHERE_PARTS: tuple[PartShape, ...] = (
    shape(
        BLOB,
        "document",
        modality=DOCUMENT,
        text=("document.data.text", "document.data.snippet", "document.data"),
        name=("document.id",),
        title=("document.data.title",),
    ),
)

# LlamaIndex's content blocks (`block_type`).
LLAMAINDEX_PARTS: tuple[PartShape, ...] = (
    shape(
        BLOB,
        "image",
        data=("image",),
        uri=("url",),
        mime_type=("image_mimetype",),
        modality="image",
    ),
    shape(BLOB, "audio", data=("audio",), uri=("url",), modality="audio"),
    shape(
        BLOB,
        "document",
        modality=DOCUMENT,
        data=("data",),
        uri=("url",),
        mime_type=("document_mimetype",),
        name=("title",),
        title=("title",),
    ),
    shape(REASONING, "thinking", text=("content",)),
    shape(
        TOOL_CALL,
        "tool_call",
        id=("tool_call_id",),
        name=("tool_name",),
        arguments=("tool_kwargs",),
    ),
    shape(
        GENERIC,
        "citable",
        modality=DOCUMENT,
        text=("content",),
        name=("source", "title"),
        title=("title",),
    ),
    shape(GENERIC, "citation", name=("source",)),
)

# The Vercel AI SDK's prompt parts (`ai.prompt.messages`).
VERCEL_AI_PARTS: tuple[PartShape, ...] = (
    shape(BLOB, "image", data=("image",), mime_type=("mediaType", "mimeType"), modality="image"),
    shape(
        FILE,
        "file",
        data=("data",),
        mime_type=("mediaType", "mimeType"),
        name=("filename",),
    ),
    shape(REASONING, "reasoning", text=("text",)),
    shape(
        TOOL_CALL,
        "tool-call",
        id=("toolCallId",),
        name=("toolName",),
        arguments=("input", "args"),
    ),
    shape(
        TOOL_CALL_RESPONSE,
        "tool-result",
        id=("toolCallId",),
        response=("output.value", "output", "result"),
        name=("toolName",),
    ),
)
