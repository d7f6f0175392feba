"""Self-play training iterations across several processes (``jax.distributed``).

Start one process per host (or several on one machine), each with its id:

    python -m examples.distributed_selfplay --coordinator 10.0.0.1:12355 \\
        --num-processes 2 --process-id 0 --game tic_tac_toe --iterations 10
    python -m examples.distributed_selfplay --coordinator 10.0.0.1:12355 \\
        --num-processes 2 --process-id 1 --game tic_tac_toe --iterations 10

Every other flag is ``examples/selfplay.py``'s (the run's ``SelfPlayConfig``;
``--batch-size`` is the global batch, a multiple of the device count of all
processes). Each process runs the same iterations on its own devices' share of
the games; the train step's gradient average crosses processes. Process 0 prints
each iteration's metrics; every process prints, at the end, SHA-256 digests of the
games, the buffer and the parameters gathered from all processes. The games and
the buffer equal those of one process with all the devices bit for bit; the
parameters equal them to float rounding (the gradient all-reduce adds the devices'
parts in another order over Gloo than inside one process), which
``--params-out PATH`` lets a test compare (``tests/test_distributed.py``).

This example runs training iterations only: no evaluation games, checkpoints or
metric files (``examples/selfplay.py`` writes those from one process).
"""

from __future__ import annotations

import argparse
import json
import sys

import numpy as np


def main(argv: list[str] | None = None) -> dict[str, str]:
    p = argparse.ArgumentParser(prog="python -m examples.distributed_selfplay",
                                description=__doc__.splitlines()[0])
    p.add_argument("--coordinator", help="host:port of process 0 (default: one process, "
                   "no jax.distributed)")
    p.add_argument("--num-processes", type=int, default=1)
    p.add_argument("--process-id", type=int, default=0)
    p.add_argument("--params-out", default=None, help="process 0 writes the final "
                   "parameters here (NumPy .npz, leaves in tree order)")
    args, rest = p.parse_known_args(argv)
    from jaxpuct.alphazero import distributed
    if args.coordinator:
        try:
            distributed.initialize(args.coordinator, args.num_processes, args.process_id)
        except ValueError as err:
            sys.exit(f"error: {err}")
    import jax

    import jaxpuct.alphazero as az
    from examples import selfplay
    config, options = selfplay.parse(rest)
    try:
        trainer = az.Trainer(config)
    except ValueError as err:
        sys.exit(f"error: {err}")
    me = jax.process_index()
    if me == 0:
        print(f"{jax.process_count()} process(es), {len(jax.devices())} devices "
              f"({jax.local_device_count()} here): {config.game}, {config.batch_size} games",
              flush=True)
    ts = trainer.init()
    for _ in range(options.iterations):
        ts, metrics = trainer.iterate(ts)
        if me == 0:
            print(json.dumps({"iteration": int(jax.device_get(ts.iteration)), **metrics}),
                  flush=True)
    digests = {"games": distributed.digest(ts.games), "buffer": distributed.digest(ts.buffer),
               "params": distributed.digest(ts.params)}
    print(f"process {me} digests {json.dumps(digests)}", flush=True)
    params = distributed.host_value(ts.params)  # a collective: every process
    if args.params_out and me == 0:
        np.savez(args.params_out, *jax.tree.leaves(params))
    return digests


if __name__ == "__main__":
    main()
