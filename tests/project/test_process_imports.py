"""What each process of the sidecar imports: every module a process loads costs it memory
for as long as it runs, so the main process loads none of the scoring code the worker
processes run, and neither loads the judge's client unless a judge is configured."""

from __future__ import annotations

import json
import subprocess
import sys

from monitor.evaluators import f1, judges, local, tlm
from monitor.evaluators.registry import known_evaluators

# The CPU scorers' code and tables (numpy, the detector, its word vectors' package).
SCORING = ("numpy", "monitor.detector", "wordllama", "tokenizers")
# The LLM judge's client, the library behind it, and the redaction of what it sends.
JUDGE = ("litellm", "monitor.judge.client", "monitor.records.redaction", "phonenumbers")
# What only the main process uses: the metrics library, the HTTP server, the evaluation
# stage and the alert rules.
MAIN_ONLY = (
    "prometheus_client",
    "aiohttp",
    "monitor.telemetry",
    "monitor.processors.evaluation._stage",
    "monitor.alerts",
)
# wordllama's own imports, which only its training and download code uses.
WORDLLAMA_DEPENDENCIES = ("wordllama", "requests", "safetensors", "toml")


def _loaded(code: str, prefixes: tuple[str, ...]) -> list[str]:
    """Of `prefixes`, the packages and modules loaded after running `code` in a fresh
    interpreter."""
    probe = (
        f"{code}\nimport json, sys\n"
        f"print(json.dumps(sorted(p for p in {list(prefixes)!r} "
        "if any(m == p or m.startswith(p + '.') for m in sys.modules))))"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    loaded: list[str] = json.loads(done.stdout.strip().splitlines()[-1])
    return loaded


def test_the_main_process_of_a_default_sidecar_loads_no_scoring_or_judge_code() -> None:
    code = (
        "import monitor.__main__\n"
        "from monitor.config import Config\n"
        "from monitor.service import Service\n"
        "Service(Config())"
    )
    assert _loaded(code, SCORING + JUDGE) == []


def test_the_main_process_loads_the_judge_client_when_a_judge_is_configured() -> None:
    code = (
        "from monitor.config import Config\n"
        "from monitor.service import Service\n"
        "Service(Config.model_validate({'judge': {'model': 'openai/gpt-4o-mini'},"
        " 'evaluators': [{'name': 'faithfulness'}]}))"
    )
    assert _loaded(code, ("monitor.judge.client",)) == ["monitor.judge.client"]


def test_the_worker_preload_loads_the_word_vectors_but_no_judge_or_wordllama_code() -> None:
    code = (
        "import monitor.processors.evaluation._preload\n"
        "import monitor.detector.embedding as embedding\n"
        "assert embedding._shared is not None, 'the word vectors were not preloaded'"
    )
    assert _loaded(code, JUDGE + WORDLLAMA_DEPENDENCIES) == []


def test_the_worker_preload_loads_nothing_only_the_main_process_uses() -> None:
    assert _loaded("import monitor.processors.evaluation._preload", MAIN_ONLY) == []


def test_the_registry_knows_every_evaluator_its_modules_build() -> None:
    built = {*judges.FACTORIES, *tlm.FACTORIES, *f1.FACTORIES, *local.FACTORIES}
    assert known_evaluators() == built
