"""Search a few real game positions with jaxpuct and print what it found.

Tic-tac-toe and connect four from pgx; the "network" is a uniform prior and a
zero value, so everything the search knows comes from exact terminal values.
Tree search and graph search (transpositions shared) side by side.

    python -m examples.search_demo
"""

from __future__ import annotations

import argparse
import time

import jax
import jax.numpy as jnp
import numpy as np

import jaxpuct


def make_pure_search_fns(env):
    """Root and recurrent functions for a pgx environment with a uniform prior
    and zero value: values from the view of the player to move, discount -1."""

    def state_hash(state):
        board = state._x.board.reshape(state._x.board.shape[0], -1).astype(jnp.uint32)
        weights = jnp.arange(1, board.shape[1] + 1, dtype=jnp.uint32)
        h0 = jnp.sum((board + 1) * weights * jnp.uint32(2654435761), axis=-1)
        h1 = jnp.sum((board + 3) * (weights ** 2) * jnp.uint32(40503), axis=-1)
        player = state.current_player.astype(jnp.uint32)
        return jnp.stack([h0 ^ player, h1 + player], axis=-1)

    def root_fn(state):
        batch = state.current_player.shape[0]
        return jaxpuct.RootFnOutput(
            prior_logits=jnp.zeros((batch, env.num_actions)), value=jnp.zeros(batch),
            embedding=state, legal_action_mask=state.legal_action_mask,
            state_hash=state_hash(state))

    def recurrent_fn(params, rng_key, action, state):
        mover = state.current_player
        new = jax.vmap(env.step)(state, action)
        reward = new.rewards[jnp.arange(action.shape[0]), mover]
        batch = action.shape[0]
        out = jaxpuct.RecurrentFnOutput(
            reward=reward, discount=-jnp.ones(batch),
            prior_logits=jnp.zeros((batch, env.num_actions)), value=jnp.zeros(batch),
            legal_action_mask=new.legal_action_mask, terminal=new.terminated,
            state_hash=state_hash(new))
        return out, new

    return root_fn, recurrent_fn


def play_moves(env, moves):
    state = env.init(jax.random.PRNGKey(0))
    for move in moves:
        state = env.step(state, move)
    return state


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--simulations", type=int, default=800)
    args = parser.parse_args(argv)

    import pgx  # example-only dependency

    cases = [
        ("tic_tac_toe", [0, 4, 8], "X took two corners, O the centre: O must take an edge"),
        ("tic_tac_toe", [4, 0, 1], "O must block column 7"),
        ("connect_four", [3, 3, 4, 4], "first player wins at once with column 2 or 5"),
    ]
    print(f"jaxpuct {jaxpuct.__version__} on {jax.devices()[0].platform}, "
          f"{args.simulations} simulations, uniform prior, zero value\n")
    for name, moves, story in cases:
        env = pgx.make(name)
        root_fn, recurrent_fn = make_pure_search_fns(env)
        state = jax.tree.map(lambda x: x[None], play_moves(env, moves))
        print(f"{name} after moves {moves}: {story}")
        for label, graph in (("tree ", None), ("graph", jaxpuct.GraphConfig())):
            policy = jax.jit(lambda s, graph=graph, root_fn=root_fn, recurrent_fn=recurrent_fn:
                             jaxpuct.alphazero_policy(
                                 None, jax.random.PRNGKey(0), root_fn(s), recurrent_fn,
                                 args.simulations, dirichlet_fraction=0.0, temperature=0.0,
                                 graph=graph))
            start = time.perf_counter()
            out = jax.block_until_ready(policy(state))
            seconds = time.perf_counter() - start
            summary = out.search_tree.summary()
            visits = np.asarray(summary.visit_counts[0])
            print(f"  {label} move {int(out.action[0])}  value {float(summary.value[0]):+.3f}"
                  f"  nodes {int(out.search_tree.num_nodes[0]):4d}"
                  f"  visits {visits.tolist()}  ({seconds:.1f}s incl. compile)")
        print()


if __name__ == "__main__":
    main()
