"""Does a MuZero connect-four model see one-move tactics? Immediate wins and
immediate losses, judged by pgx's rules.

    python -m benchmarks.muzero_tactics --run-dir R [--step N] [--positions 2048] \\
        [--simulations 0,32,256] [--seed 0] [--json out.json]
    python -m benchmarks.muzero_tactics --supervised cell,column [--seeds 0,1] \\
        [--steps 300] [--json out.json]

The positions: ``--positions`` uniformly random games of pgx's ``connect_four``,
each stopped after a random number of plies in ``[4, 30)`` (a game that ends
first keeps its last running position; the ended ones are dropped). For each
position and each legal move, pgx's ``step`` says whether the move wins at once
and whether the opponent then has a winning reply. Two kinds of positions:

* **win in one**: some legal move wins at once. Scored: the share of players'
  moves that do (a uniform random legal move is printed beside);
* **must defend**: no win in one, and some legal moves let the opponent win at
  once while others do not. Scored: the share of moves that do not.

Players: the network's prior (its argmax over legal moves, ``S = 0``) and the
run's greedy search (``jaxpuct.muzero.board_game.arena_agent``'s: no noise, the
most visited move, Gumbel's greedy choice) at each ``--simulations``, all from the
checkpoint's evaluated parameters (the moving average where the run kept one).

The model itself, from the real observation: the reward head's prediction for
each legal move, ``r(h(o), a)``, on the winning moves and on the others (mean and
the share above 0.5; the true reward is 1 and 0), and the value head at the win-
in-one positions (the mover's true value there is +1).

Intervals: 95% Wilson over positions. The learned search can play a win in one
only if its reward head says so: a miss there is the model's, not the search's.

``--supervised ENCODINGS``: the reward head alone, without self-play. For each
action encoding (:func:`jaxpuct.muzero.networks.action_planes`) and seed, a new
network of ``examples/muzero.py``'s connect-four shape (ResNet, 32 channels, 2
blocks) is trained for ``--steps`` Adam steps (2e-3, batches of 256) to predict
``r(h(o), a)`` = 1 if ``a`` wins at once, else 0 (MSE), on every legal move of
8,192 random positions (seed 1,000 + seed), then scored on the probe's
positions (seed 0, held out): the share of winning moves with ``r > 0.5``, and of
the other legal moves with ``r > 0.5``. This asks whether the dynamics can
learn where a dropped stone lands and whether it makes four, given each
encoding, apart from everything else a run does.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from jaxpuct.alphazero import scores

MIN_PLIES, MAX_PLIES = 4, 30


def _where_rows(keep: jax.Array, old: Any, new: Any) -> Any:
    """``old``'s rows where ``keep [n]``, ``new``'s elsewhere (a pytree of states)."""
    return jax.tree.map(
        lambda o, n: jnp.where(keep.reshape((-1,) + (1,) * (o.ndim - 1)), o, n), old, new)


def _rows(tree: Any, start: int, stop: int) -> Any:
    return jax.tree.map(lambda x: x[start:stop], tree)


def random_positions(count: int, seed: int):
    """``(pgx states [n], n)``: non-terminal positions of uniformly random games
    (module docstring)."""
    import pgx
    env = pgx.make("connect_four")
    init, step = jax.jit(jax.vmap(env.init)), jax.jit(jax.vmap(env.step))
    rng = np.random.default_rng(seed)
    state = init(jax.random.split(jax.random.key(seed), count))
    stop_at = rng.integers(MIN_PLIES, MAX_PLIES, count)
    for ply in range(MAX_PLIES):
        legal = np.asarray(state.legal_action_mask)
        action = np.array([rng.choice(np.flatnonzero(m)) if m.any() else 0 for m in legal])
        after = step(state, jnp.asarray(action))
        state = _where_rows(jnp.asarray((ply >= stop_at) | np.asarray(after.terminated)),
                            state, after)
    running = ~np.asarray(state.terminated)
    return jax.tree.map(lambda s: s[running], state), int(running.sum())


def move_outcomes(state) -> tuple[np.ndarray, np.ndarray]:
    """``(wins [n, 7], opponent_wins_next [n, 7])``: the legal moves that win at
    once, and those after which the opponent has a legal move that wins at once."""
    import pgx
    step = jax.jit(jax.vmap(pgx.make("connect_four").step))
    n = state.current_player.shape[0]
    legal = np.asarray(state.legal_action_mask)

    def wins_of(s):
        mover = np.asarray(s.current_player)
        out = []
        for a in range(7):
            after = step(s, jnp.full((mover.shape[0],), a))
            out.append(np.asarray(after.rewards)[np.arange(mover.shape[0]), mover] > 0)
        return np.stack(out, 1) & np.asarray(s.legal_action_mask)

    wins = wins_of(state)
    opponent = np.zeros((n, 7), bool)
    for a in range(7):
        after = step(state, jnp.full((n,), a))
        opponent[:, a] = wins_of(after).any(1) & ~np.asarray(after.terminated)
    return wins & legal, opponent & legal


def _share(hits: np.ndarray) -> dict[str, Any]:
    n = int(hits.size)
    score = float(hits.mean()) if n else float("nan")
    low, high = scores.wilson_interval(score, n) if n else (float("nan"),) * 2
    return {"share": score, "low": low, "high": high, "n": n}


def measure(run_dir: str, step: int | None, positions: int, simulations: list[int],
            seed: int) -> dict[str, Any]:
    from examples import muzero as example
    from jaxpuct.muzero import board_game
    from jaxpuct.muzero.networks import head_scalar

    config, model, params, iteration = example.load_board_network(run_dir, step)

    state, n = random_positions(positions, seed)
    wins, loses_next = move_outcomes(state)
    legal = np.asarray(state.legal_action_mask)
    win_in_one = wins.any(1)
    must_defend = ~win_in_one & (loses_next & legal).any(1) & (~loses_next & legal).any(1)
    obs = state.observation

    @jax.jit
    def heads(obs, legal):
        root = model.root(params, obs, legal)
        net = model.network(params)
        rewards = jnp.stack([head_scalar(net.dynamics(root.embedding,
                                                      jnp.full(obs.shape[:1], a))[0],
                                         net.config.reward) for a in range(7)], 1)
        return root.prior_logits, root.value, rewards

    logits, value, reward = map(np.asarray, heads(obs, jnp.asarray(legal)))
    rows = np.arange(n)

    def score_moves(actions: np.ndarray) -> dict[str, Any]:
        return {"win_in_one": _share(wins[rows, actions][win_in_one]),
                "must_defend": _share(~loses_next[rows, actions][must_defend])}

    rng = np.random.default_rng(seed + 1)
    players = {"uniform random": score_moves(
        np.array([rng.choice(np.flatnonzero(m)) for m in legal]))}
    players["prior (S = 0)"] = score_moves(np.where(legal, logits, -np.inf).argmax(1))
    for s in simulations:
        if s <= 0:
            continue
        agent = board_game.arena_agent(dataclasses.replace(config, num_simulations=s), model,
                                       params)
        keys = jax.random.split(jax.random.key(seed), n)
        chunks = [np.asarray(agent(keys[i:i + 256], _rows(state, i, i + 256)))
                  for i in range(0, n, 256)]
        players[f"search S = {s}"] = score_moves(np.concatenate(chunks))
    return {
        "run_dir": run_dir, "iteration": iteration, "positions": n,
        "win_in_one_positions": int(win_in_one.sum()),
        "must_defend_positions": int(must_defend.sum()),
        "reward_on_winning_moves": {"mean": float(reward[wins].mean()),
                                    "above_half": _share(reward[wins] > 0.5)},
        "reward_on_other_legal_moves": {"mean": float(reward[legal & ~wins].mean()),
                                        "above_half": _share(reward[legal & ~wins] > 0.5)},
        "value_at_win_in_one": float(value[win_in_one].mean()),
        "players": players,
    }


def _transitions(count: int, seed: int):
    """``(obs [n, 6, 7, 2], action [n], wins [n])`` over every legal move of
    ``count`` random positions."""
    state, n = random_positions(count, seed)
    wins, _ = move_outcomes(state)
    legal = np.asarray(state.legal_action_mask)
    rows, actions = np.nonzero(legal)
    obs = np.asarray(state.observation)[rows]
    return obs, actions.astype(np.int32), wins[rows, actions].astype(np.float32)


def _train_reward(encoding: str, seed: int, steps: int, data: tuple, test: tuple
                  ) -> dict[str, Any]:
    """One (encoding, seed) row of :func:`supervised`."""
    import optax
    from flax import nnx

    from jaxpuct.muzero.networks import NetworkConfig, head_scalar, init_network

    config = NetworkConfig(kind="resnet", hidden=(32,), channels=32, num_blocks=2,
                           action_encoding=encoding)  # type: ignore[arg-type]
    graphdef, params = init_network(config, 7, (6, 7, 2), jax.random.key(seed, impl="rbg"))
    optimizer = optax.adam(2e-3)

    def predict(params, o, a):
        net = nnx.merge(graphdef, params)
        return head_scalar(net.dynamics(net.represent(o), a)[0], config.reward)

    @jax.jit
    def train_step(params, opt_state, o, a, y):
        loss, grad = jax.value_and_grad(lambda p: jnp.mean((predict(p, o, a) - y) ** 2))(params)
        updates, opt_state = optimizer.update(grad, opt_state, params)
        return optax.apply_updates(params, updates), opt_state, loss

    obs, action, win = data
    opt_state, loss = optimizer.init(params), jnp.nan
    rng = np.random.default_rng(seed)
    for _ in range(steps):
        i = rng.integers(0, len(win), 256)
        params, opt_state, loss = train_step(params, opt_state, obs[i], action[i], win[i])
    test_obs, test_action, test_win = test
    predict_jit = jax.jit(predict)
    pred = np.concatenate([np.asarray(predict_jit(params, test_obs[i:i + 4096],
                                                  test_action[i:i + 4096]))
                           for i in range(0, len(test_win), 4096)])
    won = test_win > 0.5
    return {"encoding": encoding, "seed": seed, "steps": steps, "train_loss": float(loss),
            "winning_moves_above_half": _share(pred[won] > 0.5),
            "other_moves_above_half": _share(pred[~won] > 0.5)}


def supervised(encodings: list[str], seeds: list[int], steps: int) -> list[dict[str, Any]]:
    """The ``--supervised`` measurement (module docstring), one row per
    (encoding, seed)."""
    test = _transitions(2048, 0)
    out = []
    for seed in seeds:
        data = _transitions(8192, 1000 + seed)
        for encoding in encodings:
            row = _train_reward(encoding, seed, steps, data, test)
            print(f"| {encoding} | {seed} | {steps} | {row['train_loss']:.4f} | "
                  f"{_fmt(row['winning_moves_above_half'])} | "
                  f"{_fmt(row['other_moves_above_half'])} |", flush=True)
            out.append(row)
    return out


def _fmt(s: dict[str, Any]) -> str:
    return f"{s['share']:.3f} [{s['low']:.3f}, {s['high']:.3f}]"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.muzero_tactics",
                                description=__doc__.splitlines()[0])
    p.add_argument("--run-dir", default=None)
    p.add_argument("--supervised", default=None, metavar="ENCODINGS",
                   help="comma-separated action encodings to train the reward head with")
    p.add_argument("--seeds", default="0,1")
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--step", type=int, default=None)
    p.add_argument("--positions", type=int, default=2048)
    p.add_argument("--simulations", default="0,32,256")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", default=None)
    args = p.parse_args(argv)
    if args.supervised:
        print("| encoding | seed | steps | final train loss | winning moves, r > 0.5 | "
              "other legal moves, r > 0.5 |")
        print("|---|---|---|---|---|---|")
        rows = supervised(args.supervised.split(","),
                          [int(s) for s in args.seeds.split(",")], args.steps)
        if args.json:
            with open(args.json, "w") as f:
                json.dump(rows, f, indent=1)
        return 0
    if not args.run_dir:
        p.error("--run-dir is required (or --supervised)")
    sims = [int(s) for s in args.simulations.split(",") if s]
    out = measure(args.run_dir, args.step, args.positions, sims, args.seed)
    print(f"{out['run_dir']} at iteration {out['iteration']}: {out['positions']} positions, "
          f"{out['win_in_one_positions']} with a win in one, "
          f"{out['must_defend_positions']} that must defend")
    print(f"reward head on winning moves: mean {out['reward_on_winning_moves']['mean']:.3f}, "
          f"> 0.5 at {_fmt(out['reward_on_winning_moves']['above_half'])}; on other legal "
          f"moves: mean {out['reward_on_other_legal_moves']['mean']:.3f}, > 0.5 at "
          f"{_fmt(out['reward_on_other_legal_moves']['above_half'])}")
    print(f"value head where a win in one exists (true +1): mean {out['value_at_win_in_one']:.3f}")
    print("| player | plays the win in one | avoids losing at once |")
    print("|---|---|---|")
    for name, s in out["players"].items():
        print(f"| {name} | {_fmt(s['win_in_one'])} | {_fmt(s['must_defend'])} |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
