"""The README stays a readable front page: at most 450 lines, its first commands the two of
a new machine, and every link into the repository leading somewhere."""

from __future__ import annotations

import re

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
