"""A Gaussian policy trained on its own sampled search's target, one-step problem.

Run ``taskset -c 1 python -m benchmarks.sampled_training``.

The problem: one continuous action ``a``, reward ``-(a - 0.7)^2``, then the end.
The policy is ``N(mean, exp(log_std)^2)`` with its two parameters as the root's
prior logits (no network); each step runs :func:`jaxpuct.sampled_policy`
(``K`` samples, ``S`` simulations, PUCT, no noise) for 4 rows with their own keys
and takes a gradient step of size ``lr`` on :func:`jaxpuct.sampled_policy_loss`
(``-Σ_k w_k log π(a_k)``, Hubert et al. 2021). Printed per setting: every row's
final mean (the optimum is 0.7) and standard deviation (from 1).
"""

from __future__ import annotations

import argparse

import jax
import jax.numpy as jnp
import numpy as np

import jaxpuct
from jaxpuct import sampled

OPTIMUM = 0.7
SPACE = sampled.GaussianActions(1)
ROWS = 4


def bandit(params, key, action, embedding):
    del params, key
    batch = action.shape[0]
    return jaxpuct.RecurrentFnOutput(
        reward=-(action[:, 0] - OPTIMUM) ** 2, discount=jnp.zeros(batch),
        prior_logits=jnp.zeros((batch, 2)), value=jnp.zeros(batch),
        terminal=jnp.ones(batch, bool)), embedding


def train(simulations: int, samples: int, lr: float, steps: int, seed: int) -> np.ndarray:
    """``[ROWS, 2]`` final ``(mean, log_std)`` of each row."""
    def step(i, theta):
        root = jaxpuct.RootFnOutput(prior_logits=theta, value=jnp.zeros(ROWS),
                                    embedding=jnp.zeros(ROWS))
        out = jaxpuct.sampled_policy(None, jax.random.fold_in(jax.random.PRNGKey(seed), i),
                                     root, bandit, simulations, num_samples=samples,
                                     action_space=SPACE, dirichlet_fraction=0.0)
        grad = jax.grad(lambda t: jnp.sum(jaxpuct.sampled_policy_loss(
            SPACE, t, out.sampled_actions, out.action_weights)))(theta)
        return theta - lr * grad

    run = jax.jit(lambda: jax.lax.fori_loop(0, steps, step, jnp.zeros((ROWS, 2))))
    return np.asarray(run())


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    print("| S | K | lr | steps | final mean per row | final std per row |")
    print("|---|---|---|---|---|---|")
    for simulations, samples, lr, steps in [(8, 4, 0.1, 60), (8, 4, 0.1, 200),
                                            (16, 8, 0.05, 200), (32, 8, 0.05, 100)]:
        theta = train(simulations, samples, lr, steps, args.seed)
        means = ", ".join(f"{m:.2f}" for m in theta[:, 0])
        stds = ", ".join(f"{s:.2f}" for s in np.exp(theta[:, 1]))
        print(f"| {simulations} | {samples} | {lr} | {steps} | {means} | {stds} |", flush=True)


if __name__ == "__main__":
    main()
