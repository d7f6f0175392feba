"""docs/scaling.md: its sharding snippet runs on 4 (CPU) devices and gives, tree by
tree, what one device gives."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from conftest import xla_flags

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "scaling.md"

CHECK = """
assert len(devices) == 4, devices
assert action.sharding.is_equivalent_to(batch, action.ndim)
one = jax.devices()[0]
ref_action, ref_counts = search(jax.device_put(tictactoe.initial(B), one),
                                jax.device_put(jax.random.split(jax.random.PRNGKey(0), B), one))
assert (np.asarray(action) == np.asarray(ref_action)).all()
assert (np.asarray(counts) == np.asarray(ref_counts)).all()
assert counts.sum() == 32 * B
print("SNIPPET_OK")
"""


def test_the_sharding_snippet_runs_on_four_devices_and_matches_one():
    blocks = re.findall(r"```python\n(.*?)```", DOC.read_text(), re.S)
    snippet = next(b for b in blocks if "NamedSharding" in b)
    env = dict(os.environ, XLA_FLAGS=xla_flags("--xla_force_host_platform_device_count=4"),
               JAX_PLATFORMS="cpu")
    proc = subprocess.run([sys.executable, "-c", snippet + CHECK], env=env, cwd=ROOT,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "SNIPPET_OK" in proc.stdout
