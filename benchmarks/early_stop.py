"""Early stopping (``early_stop=True``): simulations saved, move quality, time.

Tic-tac-toe (``jaxpuct.testing.tictactoe``, exact minimax on every position):
``--positions`` non-terminal positions drawn at random (seeded), a uniform prior
and a zero value (the search must find the values itself), exact terminals,
``PUCTConfig()``, temperature 0, no noise. For each budget ``S``, with and
without early stopping:

* saved: the mean of ``summary().simulations_saved`` as a share of ``S``, and
  the share of trees that stopped early;
* optimal: the share of positions where the move is minimax-optimal, and the
  share where the two searches play the same move (the rule says: all);
* time: seconds per batched search (the best of ``--reps`` interleaved runs)
  and per move. In lockstep the loop ends only when *every* tree has stopped
  (a stopped tree still takes its lane in each network call), so a batch gains
  time only from its last trees; the ``B = 1`` rows (one position per call, the
  way an engine plays a game) show the time a single search saves.

    python -m benchmarks.early_stop [--sims 32 128 512] [--positions 256]
                                    [--single 64] [--reps 3]
    python -m benchmarks.early_stop --sims --selfplay 20 [--checkpoint RUN_DIR]
"""

from __future__ import annotations

import argparse
import functools
import time

import jax
import jax.numpy as jnp
import numpy as np

import jaxpuct
from jaxpuct.testing import tictactoe

_RF = tictactoe.make_recurrent_fn()


@functools.partial(jax.jit, static_argnames=("sims", "early_stop"))
def _search(state, key, *, sims: int, early_stop: bool):
    out = jaxpuct.alphazero_policy(None, key, tictactoe.root(state), _RF, sims,
                                   dirichlet_fraction=0.0, temperature=0.0,
                                   early_stop=early_stop)
    saved = out.search_tree.summary().simulations_saved
    return out.action, jnp.zeros_like(out.action) if saved is None else saved


def _best_time(fn, reps: int) -> float:
    best = float("inf")
    for _ in range(reps):
        start = time.perf_counter()
        jax.block_until_ready(fn())
        best = min(best, time.perf_counter() - start)
    return best


def connect_four(games: int, sims: int, reps: int) -> None:
    """Games per CPU-minute of pure-MCTS play, with and without early stopping."""
    import pgx

    from jaxpuct.envs import adapter, pgx_games
    from jaxpuct.testing.pure_search import zero_apply

    game = pgx_games.make_pgx_game("connect_four")
    apply_fn = zero_apply(game.num_actions)
    root_fn = adapter.make_root_fn(apply_fn, game.environment)
    recurrent_fn = adapter.make_recurrent_fn(apply_fn, game.environment)
    env = pgx.make("connect_four")
    step = jax.vmap(env.step)

    @jax.jit
    def opening(key):
        def body(i, carry):
            state, key = carry
            key, sub = jax.random.split(key)
            logits = jnp.where(state.legal_action_mask, 0.0, -jnp.inf)
            action = jax.random.categorical(sub, logits)
            return step(state, action), key
        state = jax.vmap(env.init)(jax.random.split(key, games))
        return jax.lax.fori_loop(0, 4, body, (state, key))[0]

    @functools.partial(jax.jit, static_argnames=("early_stop",))
    def ply(state, key, *, early_stop):
        out = jaxpuct.alphazero_policy(None, key, root_fn(None, None, state), recurrent_fn,
                                       sims, dirichlet_fraction=0.0, temperature=0.0,
                                       early_stop=early_stop)
        saved = out.search_tree.summary().simulations_saved
        searched = ~state.terminated
        saved = jnp.zeros(()) if saved is None else jnp.sum(jnp.where(searched, saved, 0))
        new = step(state, jnp.maximum(out.action, 0))
        return new, out.action, saved, jnp.sum(searched)

    def play(early_stop: bool):
        state, moves, saved, searches = start_state, [], 0.0, 0
        start = time.perf_counter()
        while not bool(jnp.all(state.terminated)):
            state, action, s, n = ply(state, jax.random.PRNGKey(0), early_stop=early_stop)
            moves.append(np.asarray(action))
            saved += float(s)
            searches += int(n)
        seconds = time.perf_counter() - start
        return seconds, np.stack(moves), saved / max(searches * sims, 1), searches

    start_state = opening(jax.random.PRNGKey(1))
    for early_stop in (False, True):
        jax.block_until_ready(ply(start_state, jax.random.PRNGKey(0), early_stop=early_stop))
    results, seconds = {}, {False: [], True: []}
    for _ in range(reps):  # interleaved, so that load changes hit both alike
        for early_stop in (False, True):
            results[early_stop] = play(early_stop)
            seconds[early_stop].append(results[early_stop][0])
    same = (results[False][1].shape == results[True][1].shape
            and bool((results[False][1] == results[True][1]).all()))
    print(f"\nconnect four, {games} games in lockstep, pure MCTS S = {sims}, 4 random opening "
          f"plies; same games move for move: {same}")
    print("| early stop | searches | saved (share of S) | s for all games (median) "
          "| games per CPU-minute (median; fastest) |")
    print("|---|---|---|---|---|")
    for early_stop, (_, _, share, searches) in results.items():
        median, best = np.median(seconds[early_stop]), min(seconds[early_stop])
        print(f"| {'yes' if early_stop else 'no'} | {searches} | {share:.1%} | {median:.2f} "
              f"| {60 * games / median:.0f}; {60 * games / best:.0f} |", flush=True)


def selfplay(steps: int, reps: int, checkpoint: str | None) -> None:
    """The connect-four recipe's self-play step (``examples/selfplay.py --game
    connect_four``: ResNet, S = 32, B = 128, temperature for 10 plies, Dirichlet
    noise; or the run ``checkpoint``'s config and newest network) with and
    without ``SelfPlayConfig.early_stop``, from the same games and keys:
    simulations saved per move, CPU seconds per step (the fastest and the
    median of ``reps`` interleaved runs of ``steps`` steps), and whether the
    buffers' positions, policy targets and outcomes are the same."""
    import dataclasses

    import examples.selfplay as example
    import jaxpuct.alphazero as az
    from jaxpuct.alphazero import checkpoints

    config = (checkpoints.load_config(checkpoint) if checkpoint
              else example.parse(["--game", "connect_four"])[0])
    # Early stopping keeps the played target (the most visited action past the
    # opening) and refuses the visit-distribution target, which it would truncate.
    config = dataclasses.replace(config, policy_target="played")
    trainers = {e: az.Trainer(dataclasses.replace(config, early_stop=e),
                              devices=jax.devices()[:1]) for e in (False, True)}
    ts = trainers[False].init()
    if checkpoint:
        ts = checkpoints.restore_checkpoint(checkpoint, ts, config)
    params, games0, buffer0 = ts.params, ts.games, ts.buffer
    # Past the first plies, so that the games are spread over the game's stages.
    for i in range(12):
        games0, buffer0, _ = trainers[False].selfplay_step(params, games0, buffer0,
                                                           jax.random.PRNGKey(100 + i))

    def run(early_stop: bool):
        # selfplay_step donates its games and buffer: each run starts from copies.
        games, buffer = jax.tree.map(jnp.copy, (games0, buffer0))
        trainer, saved = trainers[early_stop], 0
        start = time.process_time()
        for i in range(steps):
            games, buffer, metrics = trainer.selfplay_step(params, games, buffer,
                                                           jax.random.PRNGKey(i))
            saved += int(metrics["simulations_saved"])
        jax.block_until_ready(buffer)
        return time.process_time() - start, saved, jax.device_get(buffer)

    for e in (False, True):
        run(e)  # compile
    seconds, results = {False: [], True: []}, {}
    for _ in range(reps):
        for e in (False, True):
            cpu, saved, buffer = run(e)
            seconds[e].append(cpu / steps)
            results[e] = (saved, buffer)
    same = all(np.array_equal(getattr(results[False][1], f), getattr(results[True][1], f))
               for f in ("obs", "policy", "outcome"))
    moves = steps * config.batch_size
    print(f"\nconnect-four recipe self-play, B = {config.batch_size}, S = "
          f"{config.num_simulations}, {steps} steps x {reps} interleaved runs; network: "
          f"{'checkpoint ' + checkpoint if checkpoint else 'fresh'}; same positions, targets "
          f"and outcomes: {same}")
    print("| early stop | simulations saved per move (share of S) | CPU s per step (fastest; "
          "median) |")
    print("|---|---|---|")
    for e in (False, True):
        share = results[e][0] / moves / config.num_simulations
        print(f"| {'yes' if e else 'no'} | {results[e][0] / moves:.2f} ({share:.1%}) | "
              f"{min(seconds[e]):.3f}; {np.median(seconds[e]):.3f} |", flush=True)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sims", type=int, nargs="*", default=[32, 128, 512])
    parser.add_argument("--positions", type=int, default=256)
    parser.add_argument("--single", type=int, default=64,
                        help="positions searched one per call for the B = 1 timing")
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--c4-games", type=int, default=0,
                        help="connect-four games to play (0: skip)")
    parser.add_argument("--c4-sims", type=int, default=128)
    parser.add_argument("--selfplay", type=int, default=0, metavar="STEPS",
                        help="time STEPS self-play steps of the connect-four recipe with and "
                             "without SelfPlayConfig.early_stop (0: skip)")
    parser.add_argument("--checkpoint", default=None,
                        help="with --selfplay: a connect-four run directory whose newest "
                             "network plays (default: a fresh network)")
    args = parser.parse_args(argv)
    if args.selfplay:
        selfplay(args.selfplay, args.reps, args.checkpoint)
    if args.c4_games:
        connect_four(args.c4_games, args.c4_sims, args.reps)
    if not args.sims:
        return

    every = tictactoe.all_positions()
    rng = np.random.default_rng(0)
    positions = [every[i] for i in rng.choice(len(every), args.positions, replace=False)]
    codes = np.array([tictactoe.code(p) for p in positions])
    optimal = tictactoe.optimal_move_table()[codes]
    state = tictactoe.batch(positions)
    key = jax.random.PRNGKey(0)
    print(f"tic-tac-toe, B = {len(positions)} random non-terminal positions, uniform prior, "
          "zero value, temperature 0; jax", jax.__version__, jax.devices()[0].platform)
    print("| S | early stop | saved (share of S) | trees stopped | optimal moves | same move "
          "| s per search (B) | ms per move (B) | ms per move (B = 1) |")
    print("|---|---|---|---|---|---|---|---|---|")
    singles = [tictactoe.batch([p]) for p in positions[:args.single]]
    for sims in args.sims:
        moves = {}
        for early_stop in (False, True):
            run = functools.partial(_search, sims=sims, early_stop=early_stop)
            action, saved = jax.block_until_ready(run(state, key))
            moves[early_stop] = np.asarray(action)
            for one in singles[:1]:
                jax.block_until_ready(run(one, key))  # compile the B = 1 search
        times = {e: [] for e in (False, True)}
        single_times = {e: [] for e in (False, True)}
        for _ in range(args.reps):  # interleaved: the machine is shared
            for early_stop in (False, True):
                run = functools.partial(_search, sims=sims, early_stop=early_stop)
                times[early_stop].append(_best_time(lambda run=run: run(state, key), 1))
                start = time.perf_counter()
                for one in singles:
                    jax.block_until_ready(run(one, key))
                single_times[early_stop].append(time.perf_counter() - start)
        _, saved = _search(state, key, sims=sims, early_stop=True)
        saved = np.asarray(saved)
        for early_stop in (False, True):
            good = optimal[np.arange(len(positions)), moves[early_stop]].mean()
            same = (moves[True] == moves[False]).mean()
            batch_s = min(times[early_stop])
            single_ms = 1e3 * min(single_times[early_stop]) / len(singles)
            share = saved.mean() / sims if early_stop else 0.0
            stopped = (saved > 0).mean() if early_stop else 0.0
            print(f"| {sims} | {'yes' if early_stop else 'no'} | {share:.1%} | {stopped:.1%} "
                  f"| {good:.1%} | {same:.0%} | {batch_s:.3f} "
                  f"| {1e3 * batch_s / len(positions):.3f} | {single_ms:.2f} |", flush=True)


if __name__ == "__main__":
    main()
