"""Multi-process self-play: 2 processes x 2 CPU devices (jax.distributed on localhost,
Gloo collectives) give the same games, buffer and parameters as 1 process x 4."""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import xla_flags

from jaxpuct.alphazero import distributed

ROOT = Path(__file__).resolve().parents[1]
# One iteration: 9 self-play moves (tic-tac-toe games end, so the buffer fills) and
# one optimiser step, whose gradient average crosses the processes.
FLAGS = ["--game", "tic_tac_toe", "--batch-size", "8", "--num-simulations", "4",
         "--buffer-size", "128", "--train-batch-size", "16", "--hidden", "16",
         "--selfplay-steps", "9", "--train-steps", "1", "--iterations", "1"]
TIMEOUT_S = 300  # generous: the machine running the suite may be loaded


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("localhost", 0))
        return s.getsockname()[1]


def _start(devices: int, extra: list[str]) -> subprocess.Popen:
    env = dict(os.environ, JAX_PLATFORMS="cpu", PYTHONPATH=str(ROOT),
               XLA_FLAGS=xla_flags(f"--xla_force_host_platform_device_count={devices}"))
    return subprocess.Popen([sys.executable, "-m", "examples.distributed_selfplay", *extra,
                             *FLAGS], env=env, cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def _digests(proc: subprocess.Popen) -> dict[str, str]:
    try:
        out, err = proc.communicate(timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        pytest.fail(f"timed out after {TIMEOUT_S} s: {err[-2000:]}")
    assert proc.returncode == 0, err[-3000:]
    match = re.search(r"digests (\{.*\})", out)
    assert match, out[-2000:]
    return json.loads(match.group(1))


@pytest.mark.slow
def test_two_processes_equal_one_process_with_the_same_devices(tmp_path):
    port = _free_port()
    # All three at once: the reference run overlaps the two-process one.
    procs = [_start(2, ["--coordinator", f"localhost:{port}", "--num-processes", "2",
                        "--process-id", str(i), "--params-out", str(tmp_path / "two.npz")])
             for i in range(2)]
    reference = _start(4, ["--params-out", str(tmp_path / "one.npz")])
    got = [_digests(p) for p in procs]
    want = _digests(reference)
    # Every process gathers the whole state and both see the same; the games and
    # the buffer are the one-process run's bit for bit.
    assert got[0] == got[1]
    for part in ("games", "buffer"):
        assert got[0][part] == want[part], part
    # The parameters to float rounding: the train step's gradient is an all-reduce
    # over the 4 devices' rows, summed in another order over Gloo.
    two, one = np.load(tmp_path / "two.npz"), np.load(tmp_path / "one.npz")
    assert two.files == one.files and len(one.files) > 0
    for name in one.files:
        np.testing.assert_allclose(two[name], one[name], rtol=1e-5, atol=1e-6)


def test_initialize_rejects_bad_arguments():
    with pytest.raises(ValueError, match=r"process_id must be an int in \[0, 2\), got 2"):
        distributed.initialize("localhost:1234", 2, 2)
    with pytest.raises(ValueError, match="num_processes must be an int >= 1, got 0"):
        distributed.initialize("localhost:1234", 0, 0)
    with pytest.raises(ValueError, match="coordinator_address must be 'host:port'"):
        distributed.initialize("localhost", 2, 0)
