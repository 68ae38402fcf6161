"""The README stays a readable front page: at most 450 lines, its first commands the two of
a new machine, and every link into the repository leading somewhere."""

from __future__ import annotations

import re

from packaging.requirements import Requirement

from tests.conftest import REPO

README = (REPO / "README.md").read_text(encoding="utf-8")


def test_the_readme_stays_short() -> None:
    assert len(README.splitlines()) <= 450


def test_it_opens_with_the_two_set_up_commands() -> None:
    blocks = re.findall(r"```bash\n(.*?)```", README, re.S)
    assert "pip install . && rag-monitor run" in blocks[0]
    assert blocks[1].strip() == "bash tests/run.sh"
    assert "exec bash tests/run.sh" in (REPO / ".ci" / "run").read_text()


def test_every_link_into_the_repository_resolves() -> None:
    for folder, text in [(REPO, README)] + [
        (path.parent, path.read_text(encoding="utf-8")) for path in (REPO / "docs").glob("*.md")
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
