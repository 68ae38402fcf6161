"""The public surface is `monitor.__all__` and nothing else."""

from __future__ import annotations

import monitor


def test_all_lists_exactly_the_public_names() -> None:
    public = {name for name in vars(monitor) if not name.startswith("_")}
    modules = {name for name in public if type(getattr(monitor, name)).__name__ == "module"}
    assert set(monitor.__all__) - {"__version__"} == public - modules
    assert monitor.__all__ == sorted(monitor.__all__)
