"""The README opens with the two commands of a new machine, and every link into the repository
leads somewhere. The Chinese quick start (docs/zh/) is held to the README: the same two
commands, commands and flags, config keys, metric names and tracing rows that exist, so a
rename fails here too."""

from __future__ import annotations

import argparse
import re

import pytest
from packaging.requirements import Requirement

from tests.conftest import REPO

README = (REPO / "README.md").read_text(encoding="utf-8")
ZH_DOCS = sorted((REPO / "docs" / "zh").glob("*.md"))
ZH = {path.name: path.read_text(encoding="utf-8") for path in ZH_DOCS}


def test_it_opens_with_the_two_set_up_commands() -> None:
    blocks = re.findall(r"```bash\n(.*?)```", README, re.S)
    assert "pip install . && rag-monitor run" in blocks[0]
    assert blocks[1].strip() == "bash tests/run.sh"
    assert "exec bash tests/run.sh" in (REPO / ".ci" / "run").read_text()


def test_every_link_into_the_repository_resolves() -> None:
    docs = [*(REPO / "docs").glob("*.md"), *ZH_DOCS]
    for folder, text in [(REPO, README)] + [
        (path.parent, path.read_text(encoding="utf-8")) for path in docs
    ]:
        for target in re.findall(r"\]\(([^)#:]+)(?:#[^)]*)?\)", text):
            assert (folder / target).exists(), f"{folder.name}: {target}"


def test_the_quick_start_says_what_debug_records_needs() -> None:
    quick_start = README.split("## Quick start")[1].split("\n## ")[0]
    step = quick_start[quick_start.index("debug_records") :]
    assert "127.0.0.1" in step.split("\n5.")[0].split("\n\n")[0]
    assert "#the-metrics-port-tls-and-basic-auth" in step


def test_the_openai_v2_versions_the_readme_names_are_those_the_tests_pin() -> None:
    """Users of opentelemetry-instrumentation-openai-v2 are told the versions of its
    dependencies the project's own tests run it with."""
    lock = (REPO / "tests/frameworks/envs/agents/requirements.lock").read_text()
    pinned = dict(re.findall(r"^([a-z0-9-]+)==(\S+)", lock, re.M))
    named = dict(re.findall(r"`([a-z0-9-]+)==([^`]+)`", README))
    for package in ("opentelemetry-util-genai", "httpx", "openai"):
        assert named.get(package) == pinned[package], package
    assert "pip install opentelemetry-instrumentation-openai-v2==" in README
    assert (
        f"opentelemetry-instrumentation-openai-v2` {pinned['opentelemetry-instrumentation-openai-v2']}"
        in README
    )


def test_the_openai_v2_requirements_the_docs_name_are_ones_pip_accepts() -> None:
    """Each requirement of the openai-v2 stack that README or docs/ write (`name==1.1b0`, or
    inside a `pip install` line) admits the version the tests run, as pip reads it: a
    range admits a pre-release only where the range itself names one."""
    lock = (REPO / "tests/frameworks/envs/agents/requirements.lock").read_text()
    pinned = dict(re.findall(r"^([a-z0-9-]+)==(\S+)", lock, re.M))
    stack = {"opentelemetry-instrumentation-openai-v2", "opentelemetry-util-genai", "httpx"}
    texts = [README] + [path.read_text(encoding="utf-8") for path in (REPO / "docs").glob("*.md")]
    written = []
    for text in texts:
        for code in re.findall(r"`([^`]+)`", text):
            words = code.split()[2:] if code.startswith("pip install ") else [code]
            for word in words:
                requirement = re.fullmatch(r"([a-z0-9-]+)\s*([<>=!~].*)?", word)
                if requirement and requirement[1] in stack and requirement[2]:
                    written.append(Requirement(word))
    assert {r.name for r in written} >= {"opentelemetry-util-genai"}, written
    # pip's rule: a pre-release only where a specifier names one (or with --pre).
    refused = [
        str(r)
        for r in written
        if not r.specifier.contains(pinned[r.name], prereleases=bool(r.specifier.prereleases))
    ]
    assert not refused, f"pip refuses the versions the tests run: {refused}"


def test_the_quick_start_says_when_the_first_verdicts_come() -> None:
    """The sample's first verdicts wait `trace_assembly.late_spans_wait_s` (a service's first
    traces wait for spans that end after their root): the quick start says that wait."""
    from monitor.config import Config

    quick_start = README.split("## Quick start")[1].split("\n## ")[0]
    said = re.search(
        r"About (\d+) s later \(a service's first traces wait\s+`([a-z_.]+)`", quick_start
    )
    assert said is not None, "the quick start says when the first verdicts come"
    assert said[2] == "trace_assembly.late_spans_wait_s"
    assert float(said[1]) == Config().trace_assembly.late_spans_wait_s


# -- the Chinese quick start (docs/zh/) --------------------------------------------------


def _bash_blocks(text: str) -> list[str]:
    return re.findall(r"```bash\n(.*?)```", text, re.S)


def test_the_readme_links_the_chinese_quick_start() -> None:
    assert "(docs/zh/README.md)" in README
    assert "README.md" in ZH


def test_the_chinese_quick_start_opens_with_the_readmes_two_commands() -> None:
    assert _bash_blocks(ZH["README.md"])[:2] == _bash_blocks(README)[:2]


def test_the_chinese_quick_start_says_when_the_first_verdicts_come() -> None:
    from monitor.config import Config

    said = re.search(r"大约 (\d+) 秒后\s*（[^`]*`([a-z_.]+)`", ZH["README.md"])
    assert said is not None
    assert said[2] == "trace_assembly.late_spans_wait_s"
    assert float(said[1]) == Config().trace_assembly.late_spans_wait_s


def _code(text: str) -> list[str]:
    """Every inline code span and every line of a code block."""
    blocks = re.findall(r"```[a-z]*\n(.*?)```", text, re.S)
    inline = re.findall(r"`([^`\n]+)`", re.sub(r"```[a-z]*\n.*?```", "", text, flags=re.S))
    return inline + [line for block in blocks for line in block.splitlines()]


@pytest.mark.parametrize("name", sorted(ZH))
def test_the_commands_and_flags_the_chinese_docs_quote_exist(name: str) -> None:
    from monitor.__main__ import _parser

    parser = _parser({})
    commands = next(
        dict(a.choices) for a in parser._actions if isinstance(a, argparse._SubParsersAction)
    )

    def flags(p: argparse.ArgumentParser) -> set[str]:
        return {o for a in p._actions for o in a.option_strings if o.startswith("--")}

    quoted = 0
    for code in _code(ZH[name]):
        for use in re.findall(r"rag-monitor ([a-z-]+)((?: [^|&#;]*)?)", code):
            command, rest = use
            assert command in commands, f"{name}: rag-monitor {command}"
            allowed = flags(commands[command]) | flags(parser)
            for flag in re.findall(r"(--[a-z-]+)", rest):
                assert flag in allowed, f"{name}: rag-monitor {command} {flag}"
            quoted += 1
    assert quoted >= (5 if name == "README.md" else 0)


@pytest.mark.parametrize("name", sorted(ZH))
def test_the_metrics_the_chinese_docs_name_exist(name: str) -> None:
    from monitor.telemetry_metrics import METRICS

    exported = {
        f"rag_monitor_{m.name}" + ("_total" if m.kind == "counter" else "")
        for m in METRICS.values()
    }
    named = set(re.findall(r"rag_monitor_[a-z_]+[a-z]", ZH[name]))
    assert named <= exported, sorted(named - exported)


@pytest.mark.parametrize("name", sorted(ZH))
def test_the_yaml_the_chinese_docs_show_is_a_valid_config(name: str) -> None:
    import yaml

    from monitor.config import Config
    from monitor.evaluators.registry import evaluator_problems

    for block in re.findall(r"```yaml\n(.*?)```", ZH[name], re.S):
        config = Config.model_validate(yaml.safe_load(block))
        assert evaluator_problems(list(config.evaluators), config.judge.model) == []


def _table_rows(text: str) -> list[list[str]]:
    return [
        [cell.strip() for cell in line.strip().strip("|").split(" | ")]
        for line in text.splitlines()
        if line.startswith("| ") and not re.fullmatch(r"\|[-| ]+\|", line.strip())
    ]


def test_the_chinese_tracing_rows_say_what_the_readmes_say() -> None:
    """Each row of the Chinese tracing table is a row of the README's (found by the tests
    that run it), and every switch, variable and test it quotes is that row's."""
    section = ZH["README.md"].split("## 追踪你的应用")[1].split("\n## ")[0]
    english = README.split("### Tracing your app")[1].split("\n## ")[0]
    rows = [r for r in _table_rows(section) if len(r) == 4 and "`" in r[3]]
    assert len(rows) >= 5
    for row in rows:
        tests = re.findall(r"`([^`]+)`", row[3])
        matches = [
            line for line in english.splitlines() if line.startswith("| ") and tests[0] in line
        ]
        assert len(matches) == 1, f"no README row tested by {tests[0]}"
        for quoted in re.findall(r"`([^`]+)`", " | ".join(row[1:])):
            assert f"`{quoted}`" in matches[0], f"{tests[0]}: {quoted}"
