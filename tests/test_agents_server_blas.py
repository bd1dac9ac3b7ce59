"""The resident server runs numpy with one BLAS thread (P8): its vector search per prompt is small,
and BLAS threads spin-waiting after each one took a core from the hooks on a 2-core machine."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tiermem.agents.server import BLAS_THREAD_VARIABLES

PROGRAM = """
import os, sys
if sys.argv[1] == "server":
    from tiermem.agents.server import single_blas_thread
    single_blas_thread()
import numpy
numpy.ones((300, 300)) @ numpy.ones((300, 300))
print(len(os.listdir("/proc/self/task")))
"""


def threads(how: str) -> int:
    env = {k: v for k, v in os.environ.items() if k not in BLAS_THREAD_VARIABLES}
    done = subprocess.run([sys.executable, "-c", PROGRAM, how], env=env, capture_output=True, text=True, check=True)
    return int(done.stdout)


@pytest.mark.skipif(not Path("/proc/self/task").is_dir() or (os.cpu_count() or 1) < 2,
                    reason="counts threads in /proc, on a machine with at least two cores")
def test_the_server_process_runs_one_blas_thread() -> None:
    assert threads("plain") > 1  # numpy's BLAS starts threads of its own
    assert threads("server") == 1


def test_a_blas_thread_count_the_environment_chose_is_kept() -> None:
    from tiermem.agents.server import single_blas_thread

    env = {"OPENBLAS_NUM_THREADS": "4"}
    single_blas_thread(env)
    assert env == {"OPENBLAS_NUM_THREADS": "4", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
