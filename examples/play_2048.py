"""Plays pgx's 2048 with chance-node search and reports mean scores.

Three players on the same games (same seeds, so the same first tiles): uniform
random over the legal moves, one-ply greedy (the move with the largest merge
score, random among ties), and :func:`jaxpuct.stochastic_policy` with the exact
spawn probabilities (:mod:`jaxpuct.envs.pgx_2048`; no network: state value 0,
afterstate value = the move's score) at each simulation budget given.

    python -m examples.play_2048 --games 16 --sims 16,64

Each player's games run in lockstep in one jitted ``while_loop`` until every game
is over or ``--max-moves`` is reached (then the score so far counts, and the
number of unfinished games is printed).
"""

from __future__ import annotations

import argparse
import time

import jax
import jax.numpy as jnp
import numpy as np

import jaxpuct
from jaxpuct.envs import pgx_2048


def _random_move(key, legal, score):
    del score
    return jax.vmap(jax.random.categorical)(
        jax.random.split(key, legal.shape[0]), jnp.where(legal, 0.0, -jnp.inf))


def _greedy_move(key, legal, score):
    best = jnp.max(jnp.where(legal, score, -jnp.inf), axis=-1, keepdims=True)
    return _random_move(key, legal & (score == best), None)


def play(player: str, sims: int, games: int, seed: int, max_moves: int,
         selection: jaxpuct.PUCTConfig, chance_backup: str):
    """Mean score, per-game scores, moves and unfinished count of one player."""
    import pgx

    env = pgx.make("2048")
    root_fn, decision_fn, chance_fn = pgx_2048.make_search_fns()

    def choose(key, state):
        board = state._board
        legal = pgx_2048.legal_actions(board)
        if player == "search":
            out = jaxpuct.stochastic_policy(
                None, key, root_fn(state), decision_fn, chance_fn, sims,
                selection=selection, dirichlet_fraction=0.0, temperature=0.0,
                chance_backup=chance_backup)
            return jnp.maximum(out.action, 0)
        scores = jnp.stack([pgx_2048.move(board, jnp.full((games,), a))[1]
                            for a in range(pgx_2048.NUM_ACTIONS)], axis=-1)
        move_fn = _random_move if player == "random" else _greedy_move
        return move_fn(key, legal, scores)

    @jax.jit
    def run(key):
        init_key, key = jax.random.split(key)
        state = jax.vmap(env.init)(jax.random.split(init_key, games))

        def cond(carry):
            _, state, _, moves = carry
            return jnp.any(~state.terminated) & (moves < max_moves)

        def body(carry):
            key, state, total, moves = carry
            key, act_key, step_key = jax.random.split(key, 3)
            action = choose(act_key, state)
            alive = ~state.terminated
            state = jax.vmap(env.step)(state, action, jax.random.split(step_key, games))
            total = total + jnp.where(alive, state.rewards[:, 0], 0.0)
            return key, state, total, moves + 1

        init = (key, state, jnp.zeros(games), jnp.int32(0))
        _, state, total, moves = jax.lax.while_loop(cond, body, init)
        return total, moves, jnp.sum(~state.terminated)

    # The same seed gives every player the same starting boards.
    total, moves, unfinished = run(jax.random.PRNGKey(seed))
    return np.asarray(total), int(moves), int(unfinished)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--games", type=int, default=16)
    parser.add_argument("--sims", default="16,64", help="comma-separated budgets")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--max-moves", type=int, default=3000)
    parser.add_argument("--backup", default="expectation", choices=("visits", "expectation"))
    parser.add_argument("--players", default="random,greedy,search")
    args = parser.parse_args(argv)
    # Scores are unbounded: min-max normalised Q with mctx's exploration constants.
    selection = jaxpuct.PUCTConfig.mctx_muzero()
    runs = []
    for player in args.players.split(","):
        for sims in ([int(s) for s in args.sims.split(",")] if player == "search" else [0]):
            start = time.time()
            scores, moves, unfinished = play(player, sims, args.games, args.seed,
                                             args.max_moves, selection, args.backup)
            name = f"search S={sims}" if player == "search" else player
            stderr = scores.std(ddof=1) / np.sqrt(len(scores))
            runs.append(name)
            print(f"{name:16s} mean score {scores.mean():8.1f} ± {stderr:6.1f} (s.e.)  "
                  f"median {np.median(scores):8.1f}  max {scores.max():7.0f}  "
                  f"moves {moves:5d}  unfinished {unfinished}  {time.time() - start:6.1f} s",
                  flush=True)


if __name__ == "__main__":
    main()
