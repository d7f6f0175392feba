"""Exports a training run's network alone, to share or keep a trained agent.

A checkpoint of ``examples/selfplay.py`` holds the replay buffer and the
optimiser's state beside the network, megabytes to share where the network is a
few hundred kilobytes. The export (:func:`jaxpuct.alphazero.checkpoints.save_network`)
is a directory of the run's ``config.json``, the parameters (``network.npz``) and
their digests (``network.json``); ``examples/arena.py --run-dir`` and the
connect-four benchmarks (``--run-dir``, ``--ensemble``, ``--agent-ensemble``)
take it wherever they take a run's directory.

    python -m examples.export_network --run-dir runs/c4 [--step N] --out agents/c4
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    p.add_argument("--run-dir", required=True, help="a training run of examples/selfplay.py")
    p.add_argument("--step", type=int, default=None,
                   help="its checkpoint (default: the newest intact one)")
    p.add_argument("--out", required=True, help="the directory to export to")
    a = p.parse_args(argv)
    import jax

    from jaxpuct.alphazero import arena, checkpoints
    from jaxpuct.alphazero.trainer import Trainer
    if os.path.abspath(a.out) == os.path.abspath(a.run_dir):
        raise SystemExit("--out must be another directory than --run-dir")
    try:
        config = checkpoints.load_config(a.run_dir)
        trainer = Trainer(config, devices=jax.devices()[:1])
        iteration, params = arena.restore_network(a.run_dir, trainer, a.step)
        checkpoints.save_network(a.out, params, iteration, config)
    except checkpoints.CheckpointError as err:
        raise SystemExit(f"error: {err}") from err
    size = sum(os.path.getsize(os.path.join(a.out, f)) for f in os.listdir(a.out))
    print(f"exported the network of {a.run_dir} at iteration {iteration} to {a.out} "
          f"({size / 1024:.0f} kB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
