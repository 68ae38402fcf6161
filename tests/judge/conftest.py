"""litellm is imported once, at collection, and what exists then is frozen out of the
garbage collector: the collection after every test (`tests/conftest.py`, so a leak lands
on the test that leaked) would otherwise walk litellm's large heap each time, about half
a second per test. Objects the tests create are collected and checked as before."""

from __future__ import annotations

import gc
import importlib
import os

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
importlib.import_module("litellm")
gc.collect()
gc.freeze()
