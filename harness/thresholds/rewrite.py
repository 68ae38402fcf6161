"""Rewriting the copies: each listed copy's figures set to what `Figures` gives, the
blocks written whole, and the stray copies found; `python -m harness.thresholds`."""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Iterable, Mapping
from dataclasses import replace
from pathlib import Path

from harness.thresholds.copies import (
    BLOCKS,
    COPIES,
    DASHBOARD,
    KIT,
    PANEL_THRESHOLDS,
    RULES,
    Block,
    Copy,
)
from harness.thresholds.figures import ROOT, Figures

# Figures too distinctive to be anything else where they appear: a stray copy.
_STRAY_SLOTS = ("z", "z2", "z2_half", "z2_quarter", "cohort_z")

_TOKEN = r"[0-9]+(?:\.[0-9]+)?(?:e-?[0-9]+)?[a-z]*"
_SLOT = re.compile(r"\{([a-z0-9_]+)\}")
# A space of a pattern matches a line break too, and the comment mark that continues it.
_SPACE = r"(?:[ \t]*\n[ \t]*(?:#[ \t]*)?|[ \t]+)"


def _regex(pattern: str) -> re.Pattern[str]:
    out, at = [], 0

    def literal(text: str) -> str:
        return _SPACE.join(re.escape(part) for part in text.split(" "))

    for slot in _SLOT.finditer(pattern):
        out += [literal(pattern[at : slot.start()]), f"({_TOKEN})"]
        at = slot.end()
    out.append(literal(pattern[at:]))
    return re.compile("".join(out))


class CopyMissing(ValueError):
    """A listed copy is not in its file as often as listed: the text around it changed."""


def _apply_copy(text: str, copy: Copy, slots: Mapping[str, str]) -> str:
    """`text` with the figures of each occurrence of `copy` set to `slots`' (the text
    around them, line breaks included, as it is)."""
    regex = _regex(copy.pattern)
    names = _SLOT.findall(copy.pattern)
    found = len(regex.findall(text))
    if found != copy.count:
        raise CopyMissing(
            f"{copy.path}: {copy.pattern!r} occurs {found} times, not {copy.count}: "
            "update COPIES in harness/thresholds/copies.py to the text as it reads now"
        )

    def figures(match: re.Match[str]) -> str:
        out, at = [], match.start()
        for k, name in enumerate(names, 1):
            out += [text[at : match.start(k)], slots[name]]
            at = match.end(k)
        out.append(text[at : match.end()])
        return "".join(out)

    return regex.sub(figures, text)


def _apply_block(text: str, block: Block, figures: Figures) -> str:
    lines = text.splitlines(keepends=True)
    starts = [i for i, line in enumerate(lines) if line.strip() == block.key]
    if len(starts) != 1:
        raise CopyMissing(f"{block.path}: {len(starts)} lines {block.key!r}, not 1")
    start = starts[0]
    depth = len(lines[start]) - len(lines[start].lstrip())
    end = start + 1
    while end < len(lines) and (
        not lines[end].strip() or len(lines[end]) - len(lines[end].lstrip()) > depth
    ):
        end += 1
    body = [" " * (depth + 2) + line + "\n" for line in block.render(figures).splitlines()]
    return "".join([*lines[: start + 1], *body, *lines[end:]])


def alert_threshold(rules: str, alert: str) -> float:
    """The number `alert` compares its series with in the rules' text (a commented-out
    example too): the first `> number` of its expression."""
    start = rules.find(f"alert: {alert}\n")
    if start < 0:
        raise CopyMissing(f"{RULES}: no alert {alert}")
    end = rules.find("alert: ", start + 1)
    found = re.search(r"\}? > \(?([0-9.]+)\)?\s", rules[start : end if end > 0 else None])
    if found is None:
        raise CopyMissing(f"{RULES}: {alert} compares with no number")
    return float(found.group(1))


def _apply_panels(text: str, rules: str) -> str:
    """The dashboard with each `PANEL_THRESHOLDS` panel's red step and percentages set to
    its alert's threshold."""
    dashboard = json.loads(text)
    panels = {}
    for panel in dashboard["panels"]:
        panels[panel["id"]] = panel
        panels.update((inner["id"], inner) for inner in panel.get("panels", []))
    for drawn in PANEL_THRESHOLDS:
        panel = panels.get(drawn.panel_id)
        if panel is None:
            raise CopyMissing(f"{DASHBOARD}: no panel {drawn.panel_id} ({drawn.alert})")
        threshold = alert_threshold(rules, drawn.alert)
        steps = panel["fieldConfig"]["defaults"]["thresholds"]["steps"]
        red = [step for step in steps if step["color"] == "red"]
        if len(red) != 1:
            raise CopyMissing(f"{DASHBOARD}: panel {drawn.panel_id} has {len(red)} red steps")
        red[0]["value"] = threshold
        for key in ("title", "description"):
            if key in panel:
                panel[key] = re.sub(r"[0-9.]+(\s?)%", rf"{threshold * 100:g}\1%", panel[key])
    return json.dumps(dashboard, indent=2) + "\n"


def rendered(figures: Figures, root: Path = ROOT) -> dict[str, str]:
    """Every file that restates a figure, as `figures` would have it: path → text. The
    rules come first: the dashboard's threshold panels draw what they compare with."""
    slots = figures.slots()
    out: dict[str, str] = {}
    paths = {c.path for c in COPIES} | {b.path for b in BLOCKS} | {DASHBOARD}
    for path in sorted(paths, key=lambda p: (p != RULES, p)):
        text = (root / path).read_text(encoding="utf-8")
        for block in (b for b in BLOCKS if b.path == path):
            text = _apply_block(text, block, figures)
        for copy in (c for c in COPIES if c.path == path):
            text = _apply_copy(text, copy, slots)
        if path == DASHBOARD:
            text = _apply_panels(text, out[RULES])
        out[path] = text
    return out


def stale(figures: Figures, root: Path = ROOT) -> list[str]:
    """The files whose copies of the figures differ from `figures`."""
    return [
        path
        for path, text in rendered(figures, root).items()
        if (root / path).read_text(encoding="utf-8") != text
    ]


def write(figures: Figures, root: Path = ROOT) -> list[str]:
    """Rewrites every file whose copies differ from `figures`; the paths it rewrote."""
    changed = stale(figures, root)
    texts = rendered(figures, root)
    for path in changed:
        (root / path).write_text(texts[path], encoding="utf-8")
    return changed


def _kit_files(root: Path) -> Iterable[Path]:
    for name in KIT:
        top = root / name
        candidates = [top] if top.is_file() else sorted(top.rglob("*"))
        for path in candidates:
            if path.is_file() and not path.is_symlink() and "schema" not in path.parts[-2]:
                if path.suffix in {".yml", ".yaml", ".json", ".md", ".txt", ".tpl"}:
                    yield path


def strays(figures: Figures, root: Path = ROOT) -> list[str]:
    """`path:line: figure` for each distinctive figure (a z, its square) the kit writes
    outside the places `COPIES` lists: a copy no regeneration would keep true."""
    slots = figures.slots()
    values = {slots[name] for name in _STRAY_SLOTS}
    listed: dict[str, list[re.Pattern[str]]] = {}
    for copy in COPIES:
        listed.setdefault(copy.path, []).append(_regex(copy.pattern))
    out = []
    for path in _kit_files(root):
        relative = path.relative_to(root).as_posix()
        text = path.read_text(encoding="utf-8")
        for regex in listed.get(relative, []):
            text = regex.sub(lambda m: "\n" * m.group(0).count("\n"), text)
        for block in (b for b in BLOCKS if b.path == relative):
            text = _apply_block(text, replace(block, render=lambda _: ""), figures)
        for number, line in enumerate(text.splitlines(), 1):
            for value in values:
                if re.search(rf"(?<![0-9.]){re.escape(value)}(?![0-9])", line):
                    out.append(f"{relative}:{number}: {value}")
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m harness.thresholds",
        description="Rewrite the thresholds deploy/, grafana/ and docs/ restate from the "
        "config defaults and the judging code.",
    )
    parser.add_argument(
        "--check", action="store_true", help="list what is out of date, change nothing"
    )
    args = parser.parse_args(argv)
    figures = Figures.from_defaults()
    try:
        changed = stale(figures) if args.check else write(figures)
    except CopyMissing as problem:
        print(problem, file=sys.stderr)
        return 2
    stray = strays(figures)
    for path in changed:
        print(f"{'out of date' if args.check else 'rewrote'}: {path}")
    for place in stray:
        print(f"a copy COPIES does not list: {place}", file=sys.stderr)
    return 1 if stray or (args.check and changed) else 0
