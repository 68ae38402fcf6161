"""`python -m harness.thresholds [--check]`: rewrite (or check) every copy of a figure."""

import sys

from harness.thresholds.rewrite import main

sys.exit(main())
