"""One BLAS thread per process, set before numpy is first imported.

numpy's BLAS would otherwise start a thread per CPU in every process of the sidecar (main,
fork server, each worker), each with its own buffers: the detector's matrices are small
and the worker processes already use every CPU the sidecar is given, so the extra threads
cost memory and contend for the same cores. A value set in the environment wins.
"""

import os

for _name in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_name, "1")
