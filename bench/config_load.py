"""Loading a 12 MB config of 220,000 sampling overrides: time and peak memory of the
monitor's YAML loader and of `load_config`, against libyaml's safe loader
(`yaml.CSafeLoader`) loading the same file.

    python bench/config_load.py [--overrides 220000] [--runs 3]

Each step runs in a fresh interpreter (`bench/_config_load_step.py`), after its imports and once the file is read, so
that its peak RSS (`ru_maxrss`) above that point is its own:

- `CSafeLoader`: `yaml.load(text, Loader=yaml.CSafeLoader)` (the reference);
- `load_yaml`: the monitor's loader (values built from libyaml's events, with the alias,
  duplicate-key and depth checks);
- `load_config`: that, `${env:...}` expansion, overrides and validation into `Config`.

Prints the median time and peak RSS of each step and their ratios to the reference.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._fresh import Result, in_turns, print_table, run_child

STEPS = ("CSafeLoader", "load_yaml", "load_config")


def write_config(path: Path, overrides: int) -> None:
    with path.open("w", encoding="utf-8") as out:
        out.write("sampling:\n  rate: 0.5\n  overrides:\n")
        for i in range(overrides):
            out.write(f"    - {{service: svc-{i:06d}, route: /o/{i}, rate: 0.25}}\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--overrides", type=int, default=220_000)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "big.yaml"
        write_config(path, args.overrides)
        size = path.stat().st_size

        def run(step: str) -> Result:
            result = run_child("bench._config_load_step", step, str(path))
            assert result["count"] == args.overrides, result
            return result

        results = in_turns(STEPS, args.runs, run)
    print(f"a config of {args.overrides:,} sampling overrides: {size / 1e6:.1f} MB")
    print_table(results)


if __name__ == "__main__":
    main()
