"""Stochastic MuZero's chance codes on a two-outcome MDP: do they separate, and when?

The MDP of ``tests/test_stochastic_muzero.py``: from s0 action 0 leads by chance to
s1 (p = 0.7, reward +1) or s2 (p = 0.3, reward -1), then the episode ends. The batch
is every window of 10 episodes holding the outcomes at exactly 7 and 3, so once the
encoder gives the two transitions different codes the code prior's optimum is
0.7 / 0.3. Codes can *collapse* (both transitions on one code, prior 1.0): the
straight-through gradient is the softmax's, which vanishes as the encoder's softmax
saturates. For each commitment weight ``beta`` and each of ``--seeds`` NumPy
initialisations this prints, after each of ``--steps`` full-batch Adam steps,
whether the codes differ and the prior on them::

    taskset -c 0 python -m benchmarks.code_collapse --commitment 0 0.01 0.1

CPU cost: 276 s for the three weights above (6 seeds, 600 steps each; every seed
compiles its own step), one core of a loaded 2-core machine.
"""

from __future__ import annotations

import argparse

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from jaxpuct.muzero import stochastic_networks as snet
from jaxpuct.muzero import stochastic_training as st
from jaxpuct.muzero import targets as targets_lib
from jaxpuct.muzero.networks import NetworkConfig
from jaxpuct.muzero.training import LossConfig

NUM_ACTIONS, NUM_CODES, OBS_SIZE = 2, 3, 4
CONFIG = NetworkConfig(hidden=(16,), latent_size=8, value_support=3, reward_support=3)
UNROLL, TD, GAMMA = 2, 2, 0.9


def mdp_batch() -> st.StochasticBatch:
    """Every window (K = 2, n = 2) of the 10 episodes: ``[20, ...]``."""
    eye = np.eye(OBS_SIZE, dtype=np.float32)
    width = targets_lib.window_length(UNROLL, TD)
    obs, rewards, ends, filled = [], [], [], []
    for episode in range(10):
        first = episode < 7
        episode_obs = [eye[0], eye[1] if first else eye[2]]
        episode_rewards = [1.0 if first else -1.0, 0.0]
        for start in (0, 1):
            length = 2 - start
            o = np.zeros((UNROLL + 1, OBS_SIZE), np.float32)
            o[:length] = episode_obs[start:]
            r = np.zeros(width, np.float32)
            r[:length] = episode_rewards[start:]
            obs.append(o)
            rewards.append(r)
            ends.append(np.arange(width) == length - 1)
            filled.append(np.arange(width) < length)
    count = len(obs)
    targets = targets_lib.unroll_targets(
        jnp.asarray(np.stack(rewards)), jnp.zeros((count, width)),
        jnp.full((count, width, NUM_ACTIONS), 1.0 / NUM_ACTIONS), jnp.asarray(np.stack(ends)),
        jnp.asarray(np.stack(filled)), GAMMA, UNROLL, TD)
    return st.StochasticBatch(observations=jnp.asarray(np.stack(obs)),
                              actions=jnp.zeros((count, UNROLL), jnp.int32), targets=targets,
                              weights=jnp.ones((count,)), index=jnp.zeros((count,), jnp.int32))


def numpy_init(seed: int):
    """Kernels ~ N(0, 1 / fan_in), biases 0, LayerNorm scales 1 (as the test draws)."""
    graphdef, abstract = nnx.split(nnx.eval_shape(lambda: snet.StochasticMuZeroNetwork(
        CONFIG, NUM_ACTIONS, NUM_CODES, OBS_SIZE, rngs=nnx.Rngs(0))))
    rng = np.random.default_rng(seed)

    def draw(path, leaf):
        name = jax.tree_util.keystr(path)
        if "kernel" in name:
            return jnp.asarray(rng.normal(size=leaf.shape) / np.sqrt(leaf.shape[0]), leaf.dtype)
        return jnp.full(leaf.shape, 1.0 if "scale" in name else 0.0, leaf.dtype)

    return graphdef, jax.tree_util.tree_map_with_path(draw, abstract)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--commitment", type=float, nargs="+", default=[0.0, 0.01, 0.1])
    parser.add_argument("--seeds", type=int, default=6)
    parser.add_argument("--steps", type=int, nargs="+", default=[200, 600])
    parser.add_argument("--learning-rate", type=float, default=1e-2)
    args = parser.parse_args(argv)
    batch = mdp_batch()
    eye = jnp.eye(OBS_SIZE)
    print("beta\tseed\tsteps\tcodes differ\tprior on (s1's code, s2's code)")
    for beta in args.commitment:
        config = st.StochasticLossConfig(
            base=LossConfig(policy_weight=1.3, value_weight=0.25, reward_weight=0.7,
                            learning_rate=args.learning_rate, weight_decay=0.0),
            afterstate_value_weight=0.4, code_weight=0.9, commitment_weight=beta)
        optimizer = st.make_stochastic_optimizer(config)
        for seed in range(args.seeds):
            graphdef, params = numpy_init(seed)
            step = jax.jit(lambda p, o, g=graphdef, c=config, t=optimizer:
                           st.stochastic_train_step(g, t, c, p, o, batch))

            @jax.jit
            def read(p, g=graphdef):
                net = nnx.merge(g, p)
                obs = eye[jnp.array([0, 0])]
                after = net.afterstate_dynamics(net.represent(obs), jnp.zeros((2,), jnp.int32))
                sigma, _ = net.afterstate_predict(after)
                code, _ = net.encode(obs, eye[1:3])
                return jax.nn.softmax(sigma[0]), jnp.argmax(code, -1)

            opt_state = optimizer.init(params)
            for i in range(max(args.steps)):
                params, opt_state, _ = step(params, opt_state)
                if i + 1 in args.steps:
                    prior, codes = (np.asarray(x) for x in read(params))
                    print(f"{beta}\t{seed}\t{i + 1}\t{codes[0] != codes[1]}\t"
                          f"{prior[codes[0]]:.3f}, {prior[codes[1]]:.3f}", flush=True)


if __name__ == "__main__":
    main()
