"""The escalation recipe in examples/config.yaml: uncommented, it is a valid configuration that
sends the detector's uncertain band to the groundedness judge."""

from __future__ import annotations

from pathlib import Path

from monitor.config import load_config

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "config.yaml"


def test_the_recipe_uncommented_escalates_the_band_to_the_judge(tmp_path: Path) -> None:
    lines = EXAMPLE.read_text(encoding="utf-8").splitlines()
    start = next(i for i, line in enumerate(lines) if "# - name: groundedness" in line)
    recipe = [
        line.replace("# ", "", 1) if line.lstrip().startswith("#") else line
        for line in lines[start : start + 3]
    ]
    model = next(i for i, line in enumerate(lines) if "# model: openai/" in line)
    lines[model] = lines[model].replace("# model", "model")
    lines[start : start + 3] = recipe
    path = tmp_path / "config.yaml"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    config = load_config(path, environ={})
    (judge,) = [e for e in config.evaluators if e.name == "groundedness"]
    assert judge.escalate_from == "local_groundedness"
    assert judge.band is not None and tuple(map(float, judge.band)) == (0.3, 0.7)
