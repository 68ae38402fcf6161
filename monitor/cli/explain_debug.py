"""`rag-monitor explain --from-debug URL`: the OTLP/JSON bodies of the traces a running
monitor's `/debug/records` keeps, read over HTTP from its metrics port.

The port may not be a monitor's, or may misbehave: the whole read has one deadline (the
page and every trace it lists: connecting, the headers and the bodies together, so neither
a server that sends a byte every few seconds nor a page listing thousands of traces, each
answered just within a deadline of its own, can hold it), the page a size cap and the
traces' bodies one cap together, each above anything `/debug/records` writes (read as they
arrive, refused at the cap, never held whole), and the page is parsed by orjson, whose
nesting limit refuses JSON nested past any page. A redirect is refused, never followed
(a monitor's port never answers one). Each is an `ExplainError` saying, in one line, which
URL and what went wrong."""

from __future__ import annotations

import asyncio

import aiohttp
import orjson

from monitor.exporters.debug_records import KIND_BYTES, PATH, TRACES_PATH

DEADLINE_S = 30.0  # the page and its traces, whole
# A page holds at most 3 * KIND_BYTES of entries, and the traces it keeps at most
# KIND_BYTES of spans together; JSON's framing adds little. Past this the page, or the
# traces' bodies together, are no monitor's.
BODY_BYTES = 4 * KIND_BYTES
_CHUNK = 64 * 1024


class ExplainError(Exception):
    """What explain was given cannot be read as OTLP/JSON traces (one line, said why)."""


def fetch_debug_traces(
    url: str, trace_id: str | None, deadline_s: float = DEADLINE_S
) -> tuple[dict[str, bytes], dict[str, int]]:
    """The OTLP/JSON body of each trace `/debug/records` at `url` keeps (or of
    `trace_id`), by trace id, and the number of spans it left out of each that lacks
    some; `ExplainError` says why not."""
    if not url.startswith(("http://", "https://")):
        raise ExplainError(f"{url}: not an http:// or https:// URL")
    return asyncio.run(_fetch_all(url, trace_id, deadline_s))


async def _fetch_all(
    url: str, trace_id: str | None, deadline_s: float
) -> tuple[dict[str, bytes], dict[str, int]]:
    base = url.rstrip("/").removesuffix(PATH)
    page_url = base + PATH
    read = _Read(asyncio.get_running_loop().time() + deadline_s, deadline_s)
    async with aiohttp.ClientSession() as session:
        body = await _get(session, page_url, read, f"{page_url} (is debug_records on?)")
        kept = _kept(body, page_url, trace_id)
        bodies = {}
        read.room = BODY_BYTES  # for the traces' bodies together
        for kept_id in kept:
            trace_url = base + TRACES_PATH + kept_id
            bodies[kept_id] = await _get(session, trace_url, read, trace_url)
            read.room -= len(bodies[kept_id])
    return bodies, {t: n for t, n in kept.items() if n}


class _Read:
    """What is left of the whole read: its deadline (the event loop's time) and the bytes
    the bodies still to come may hold."""

    def __init__(self, deadline: float, deadline_s: float) -> None:
        self.deadline = deadline
        self.deadline_s = deadline_s
        self.room = BODY_BYTES


def _kept(body: bytes, page_url: str, trace_id: str | None) -> dict[str, int]:
    """The traces the page keeps (or `trace_id`), with the spans left out of each."""
    try:
        page = orjson.loads(body)
        kept = {str(t["trace_id"]): int(t["spans_left_out"]) for t in page["traces"]}
    except orjson.JSONDecodeError as exc:
        said = "JSON nested too deeply" if "depth" in str(exc) else f"not JSON: {exc}"
        raise ExplainError(f"{page_url}: not a rag-monitor {PATH} page: {said}") from None
    except (ValueError, KeyError, TypeError) as exc:
        raise ExplainError(f"{page_url}: not a rag-monitor {PATH} page: {exc!r}") from None
    if trace_id is not None:
        if trace_id.lower() not in kept:
            raise ExplainError(
                f"{page_url}: keeps no spans of trace {trace_id} (it keeps {len(kept)} "
                "trace(s): those that gave no record, an incomplete or a suspect one)"
            )
        kept = {trace_id.lower(): kept[trace_id.lower()]}
    if not kept:
        raise ExplainError(
            f"{page_url}: keeps no trace's spans yet (it keeps those that gave no record, "
            "an incomplete or a suspect one)"
        )
    return kept


async def _get(session: aiohttp.ClientSession, url: str, read: _Read, what: str) -> bytes:
    """The body at `url`, read within what is left of `read`'s deadline and bytes."""
    try:
        async with asyncio.timeout_at(read.deadline):
            # A monitor's metrics port never redirects: one that does may hand the read
            # (and whatever the session sends) to another port or host.
            async with session.get(url, allow_redirects=False) as response:
                if 300 <= response.status < 400:
                    where = response.headers.get("Location", "nowhere said")
                    raise ExplainError(
                        f"{what}: answered HTTP {response.status}, a redirect to {where[:200]}; "
                        "not followed (a rag-monitor metrics port never redirects): give the "
                        "URL of the monitor's metrics port itself"
                    )
                body = await _bounded(response, url, read.room)
                if response.status == 401:
                    raise ExplainError(f"{what}: the metrics port asks for credentials")
                if response.status >= 400:
                    raise ExplainError(f"{what}: {_error_of(body, response)}")
                return body
    except TimeoutError:
        raise ExplainError(
            f"{url}: no whole answer within {read.deadline_s:g} s (the deadline of the page "
            "and its traces together)"
        ) from None
    except (aiohttp.ClientError, OSError, ValueError) as exc:
        raise ExplainError(f"{url}: cannot be read: {exc or type(exc).__name__}") from None


async def _bounded(response: aiohttp.ClientResponse, url: str, room: int) -> bytes:
    """The body, as it arrives, refused once it passes `room` bytes."""
    cap = f"{BODY_BYTES // (1024 * 1024)} MiB"
    left = cap if room == BODY_BYTES else f"the {room:,} bytes left of {cap}"
    too_large = ExplainError(
        f"{url}: the body is larger than {left} (the page and its traces' bodies "
        f"together), more than any {PATH} keeps: not read"
    )
    if response.content_length is not None and response.content_length > room:
        raise too_large
    chunks: list[bytes] = []
    size = 0
    async for chunk in response.content.iter_chunked(_CHUNK):
        size += len(chunk)
        if size > room:
            raise too_large
        chunks.append(chunk)
    return b"".join(chunks)


def _error_of(body: bytes, response: aiohttp.ClientResponse) -> str:
    """What an error answer says: a monitor's `{"error": ...}`, else its status."""
    try:
        said = orjson.loads(body)["error"]
        if isinstance(said, str):
            return said
    except (orjson.JSONDecodeError, KeyError, TypeError):
        pass
    return f"HTTP {response.status} {response.reason}"
