"""The strength cost of ``K`` leaves per step, in the arena against OpenSpiel's MCTSBot.

Several leaves per step (``leaves_per_step = K``, virtual loss keeping the ``K``
walks of a step apart) evaluate their leaves as one batch, which is what makes
rollouts or a network cheaper per simulation; the walks of a step do not see each
other's results, so at equal simulations the search may play weaker. This
benchmark measures that in play: a pure jaxpuct search (uniform prior; at a new
leaf a zero value, or the outcome of one uniform random rollout to the end of the
game, :mod:`jaxpuct.envs.rollouts` with ``mix = 1``, as the bot's evaluator)
with ``K = 1, 4, 16`` against ``pyspiel.MCTSBot`` (UCT ``c = 2``, one random
rollout per leaf, the arena's default ``solve=True``) at equal simulations, in
:func:`jaxpuct.alphazero.arena.play_match` (every move and result cross-checked
against OpenSpiel's rules; half the games with jaxpuct moving first).

The jaxpuct side is ``alphazero_policy`` with the default PUCT rule, no root
noise, the most visited move (temperature 0), tree capacity ``S + 1``: at ``K = 1``
the search of :func:`jaxpuct.alphazero.arena.pure_search_agent` with
``selection="puct"`` (that agent's default is UCT, MCTSBot's rule). ``S`` is rounded
up to a multiple of ``K`` (1,008 at ``K = 16`` against the bot's 1,000). The
arena searches all games of a match in one batch; each tree of a batch is
searched independently (the batch-versus-single tests check it), so the moves
are those of ``B = 1`` searches, and only the time differs.

    taskset -c 1 python -m benchmarks.arena_leaves [--games tic_tac_toe,connect_four]
        [--values zero,rollouts] [--ks 1,4,16] [--sims 1000] [--matches 64]
        [--seed 0] [--jsonl results.jsonl]
    python -m benchmarks.arena_leaves --pool results.jsonl   # matches summed per pairing

Prints one Markdown row per pairing: W/D/L with each colour, the score with its
Wilson 95% interval, the Elo difference and the wall time.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import time

import jax
import jax.numpy as jnp

import jaxpuct


def leaves_agent(game: str, sims: int, value: str, leaves: int):
    """``(keys [B], pgx states [B]) -> actions [B]``: the greedy pure search of the
    module docstring with ``leaves`` walks per step and ``sims`` simulations (a
    multiple of ``leaves``)."""
    from jaxpuct.alphazero.config import MAX_MOVES
    from jaxpuct.envs import adapter, rollouts
    from jaxpuct.envs.pgx_games import make_pgx_game
    from jaxpuct.testing.pure_search import zero_apply

    pgx_game = make_pgx_game(game)
    env, apply_fn = pgx_game.environment, zero_apply(pgx_game.num_actions)
    root_fn = adapter.make_root_fn(apply_fn, env)
    if value == "zero":
        recurrent_fn = adapter.make_recurrent_fn(apply_fn, env)
    elif value == "rollouts":
        recurrent_fn = rollouts.make_recurrent_fn(apply_fn, env, mix=1.0,
                                                  max_steps=MAX_MOVES[game])
    else:
        raise ValueError(f"value must be 'zero' or 'rollouts', got {value!r}")

    @jax.jit
    def act(keys, state):
        root = root_fn(None, keys[0], state)
        return jaxpuct.alphazero_policy(
            None, keys, root, recurrent_fn, sims, dirichlet_fraction=0.0,
            temperature=jnp.zeros((keys.shape[0],), jnp.float32), max_nodes=sims + 1,
            leaves_per_step=leaves).action

    return act


def _elo(x: float) -> str:
    return f"{x:+.0f}" if math.isfinite(x) else ("+inf" if x > 0 else "-inf")


def pool(path: str) -> None:
    """Prints, per (game, value, K), the W/D/L of every record of ``path`` (one
    JSON line per match, ``--jsonl``) summed, with the pooled score's interval."""
    from jaxpuct.alphazero.scores import match_score
    groups: dict[tuple, list[dict]] = {}
    with open(path) as f:
        for line in f:
            r = json.loads(line)
            groups.setdefault((r["game"], r["value"], r["k"]), []).append(r)
    print("| game | value | K | seeds | games | first W/D/L | second W/D/L | score, 95% | "
          "Elo, 95% |")
    print("|---|---|---|---|---|---|---|---|---|")
    for (game, value, k), records in groups.items():
        first = [sum(r["first"][i] for r in records) for i in range(3)]
        second = [sum(r["second"][i] for r in records) for i in range(3)]
        t = match_score(*(a + b for a, b in zip(first, second, strict=True)))
        seeds = ",".join(str(r["seed"]) for r in records)
        print(f"| {game} | {value} | {k} | {seeds} | {t.games} | {'/'.join(map(str, first))} | "
              f"{'/'.join(map(str, second))} | {t.score:.3f} [{t.score_low:.3f}, "
              f"{t.score_high:.3f}] | {_elo(t.elo)} [{_elo(t.elo_low)}, {_elo(t.elo_high)}] |")


def main(argv: list[str] | None = None) -> None:
    from jaxpuct.alphazero import arena

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--games", default="tic_tac_toe,connect_four")
    parser.add_argument("--values", default="zero,rollouts")
    parser.add_argument("--ks", default="1,4,16")
    parser.add_argument("--sims", type=int, default=1000)
    parser.add_argument("--matches", type=int, default=64, help="games per pairing (even)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--jsonl", help="append one JSON record per pairing")
    parser.add_argument("--pool", metavar="JSONL", help="print the matches of this --jsonl "
                        "file pooled per pairing (summed W/D/L) instead of playing")
    args = parser.parse_args(argv)
    if args.pool:
        pool(args.pool)
        return
    if args.matches < 2 or args.matches % 2:
        parser.error(f"--matches must be even and >= 2, got {args.matches}")
    bot = arena.BotSpec(simulations=args.sims)
    print(f"jaxpuct pure search vs {bot.describe()}; {args.matches} games per pairing, "
          f"seed {args.seed}; cores {sorted(os.sched_getaffinity(0))}; jax {jax.__version__}")
    print("| game | value | K | jaxpuct S | first W/D/L | second W/D/L | score, 95% | "
          "Elo, 95% | wall s |")
    print("|---|---|---|---|---|---|---|---|---|", flush=True)
    for game in args.games.split(","):
        for value in args.values.split(","):
            for k in (int(x) for x in args.ks.split(",")):
                sims = -(-args.sims // k) * k
                agent = leaves_agent(game, sims, value, k)
                r = arena.play_match(agent, game, bot, args.matches, seed=args.seed)
                t = r.total
                print(f"| {game} | {value} | {k} | {sims} | {r.first.wins}/{r.first.draws}/"
                      f"{r.first.losses} | {r.second.wins}/{r.second.draws}/"
                      f"{r.second.losses} | {t.score:.3f} [{t.score_low:.3f}, "
                      f"{t.score_high:.3f}] | {_elo(t.elo)} [{_elo(t.elo_low)}, "
                      f"{_elo(t.elo_high)}] | {r.seconds:.0f} |", flush=True)
                if args.jsonl:
                    with open(args.jsonl, "a") as f:
                        f.write(json.dumps(dict(
                            game=game, value=value, k=k, sims=sims, bot_sims=args.sims,
                            games=args.matches, seed=args.seed, time=time.time(),
                            seconds=r.seconds, bot_seconds=r.bot_seconds,
                            first=[r.first.wins, r.first.draws, r.first.losses],
                            second=[r.second.wins, r.second.draws, r.second.losses],
                            score=[t.score, t.score_low, t.score_high])) + "\n")


if __name__ == "__main__":
    main()
