"""One search at a time (B = 1) beside OpenSpiel's C++ ``MCTSBot``.

A user who analyses one position or plays one game searches with ``B = 1``. This
benchmark times, in one process, one search from the initial position of
connect four and of tic-tac-toe (pgx rules on the jaxpuct side, OpenSpiel's on the
other), ``S`` simulations each:

* ``mctsbot``: ``pyspiel.MCTSBot`` (C++; UCT with ``c = 2``, one uniform random
  rollout per leaf from ``pyspiel.RandomRolloutEvaluator``, ``solve=False``),
  timed around ``bot.step(state)`` (it builds a new tree on every call);
* ``zero``: jaxpuct's ``alphazero_policy`` with a uniform prior and a zero value
  (:mod:`jaxpuct.testing.pure_search`), one leaf per step;
* ``mctx`` (``--variants ...,mctx``): ``mctx.muzero_policy`` with the same uniform
  prior and zero value (mctx's own selection rule), for the ratio between the two
  libraries at ``B = 1``;
* ``rollout K=k``: the same search whose leaf value is one uniform random rollout
  to the end of the game (:mod:`jaxpuct.envs.rollouts`, ``mix = 1``, as
  MCTSBot's evaluator), ``leaves_per_step = k``: the ``k`` leaves of a step are
  evaluated by one batched rollout (virtual loss keeps their walks apart);
* ``lean-zero``, ``lean-rollout`` (``--variants ...``, connect four only): the
  ``zero`` and ``rollout K=k`` searches on :mod:`jaxpuct.envs.connect_four`, the
  same game whose move checks the lines through the new stone only (pgx's checks
  all 69 lines of four), in the tree and in the rollouts.
* ``uct-rollout``, ``lean-uct-rollout`` (``--variants ...``; the second connect four
  only): ``rollout K=1`` and its lean-rules form selecting by UCT
  (:meth:`jaxpuct.PUCTConfig.uct`, MCTSBot's rule; the others select by jaxpuct's
  default PUCT rule), the search that plays level with MCTSBot at equal simulations
  (``docs/arena.md``).

jaxpuct's searches are jitted, compiled and warmed up first; then every variant
is called in turn, round by round (so that the shared machine's load hits them
alike), each call with a new key (a new seed for the bot; the keys are made
before the clock starts, as the seeds are). The figures are the
medians over the rounds of ``S / seconds per call`` (``S`` rounded up to a
multiple of ``K``: 1,008 simulations at ``K = 16``) and their ratio to the bot's
median. Pin the process to one core so that neither side uses more::

    taskset -c 0 python -m benchmarks.single_search [--sims 1000] [--reps 7]
        [--games connect_four,tic_tac_toe] [--ks 1,4,16] [--variants zero,rollout,mcts]

``--small-loops BYTES`` sets, for this process, XLA:CPU's threshold below which a
while loop (its operands' bytes) is compiled into one function instead of being
run op by op by the CPU runtime (``XLA_FLAGS=--xla_backend_extra_options=
xla_cpu_small_while_loop_byte_threshold=BYTES``; jax 0.10's XLA reads it from
there only). At ``B = 1`` every operation of the search's loops is tiny and the
runtime's cost per operation dominates; with the whole search loop under the
threshold (a ``B = 1`` tree of 1,001 nodes with pgx connect-four states is about
0.4 MB) the loop runs as compiled code.

``--quality 64,256`` measures instead what the ``K`` leaves cost in strength at equal
simulations: on every non-terminal tic-tac-toe position (the exact oracle
:mod:`jaxpuct.testing.tictactoe`, its own JAX rules), the share of searches whose
move (temperature 0) is minimax-optimal, for each ``K``, with a zero value and with
one random rollout per leaf (``--values``)::

    taskset -c 1 python -m benchmarks.single_search --quality 64,256 --ks 1,4,16
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import jax
import jax.numpy as jnp
import numpy as np

import jaxpuct


def _zero_value_game(game: str):
    """``(pgx_game, apply_fn, root_fn, zero-value recurrent_fn)`` of ``game`` with a
    uniform prior (``apply_fn``), shared by the jaxpuct and mctx searches below."""
    from jaxpuct.envs import adapter
    from jaxpuct.envs.pgx_games import make_pgx_game
    from jaxpuct.testing.pure_search import zero_apply

    pgx_game = make_pgx_game(game)
    apply_fn = zero_apply(pgx_game.num_actions)
    return (pgx_game, apply_fn, adapter.make_root_fn(apply_fn, pgx_game.environment),
            adapter.make_recurrent_fn(apply_fn, pgx_game.environment))


def jaxpuct_search(game: str, sims: int, value: str, leaves: int, rules: str = "pgx",
                   selection: jaxpuct.PUCTConfig = jaxpuct.PUCTConfig()):
    """``(key) -> action [1]``: a jitted B = 1 search from ``game``'s initial position
    (``value``: ``"zero"`` or ``"rollout"``; ``leaves`` per step; ``rules``: ``"pgx"``,
    or ``"lean"`` for connect four's :mod:`jaxpuct.envs.connect_four`, in the tree and
    in the rollouts; ``selection``: the rule)."""
    from jaxpuct.alphazero.config import MAX_MOVES
    from jaxpuct.envs import rollouts

    pgx_game, apply_fn, root_fn, recurrent_fn = _zero_value_game(game)
    environment, init = pgx_game.environment, lambda: pgx_game.init(jax.random.PRNGKey(0), 1)
    if rules == "lean":
        from jaxpuct.envs import adapter
        from jaxpuct.envs import connect_four as lean

        if game != "connect_four":
            raise ValueError(f"--variants lean-*: connect four only, not {game}")
        environment, init = lean.environment(), lambda: lean.init(1)
        root_fn = adapter.make_root_fn(apply_fn, environment)
        recurrent_fn = adapter.make_recurrent_fn(apply_fn, environment)
    if value != "zero":
        recurrent_fn = rollouts.make_recurrent_fn(apply_fn, environment, mix=1.0,
                                                  max_steps=MAX_MOVES[game])

    def search(key):
        root = root_fn(None, key, init())
        out = jaxpuct.alphazero_policy(None, key, root, recurrent_fn, sims,
                                       dirichlet_fraction=0.0, temperature=0.0,
                                       leaves_per_step=leaves, selection=selection)
        return out.action

    return jax.jit(search)


def mctx_search(game: str, sims: int):
    """``(key) -> action [1]``: ``mctx.muzero_policy`` (its own rule) with the same
    uniform prior and zero value, jitted, from ``game``'s initial position."""
    import mctx

    pgx_game, _, root_fn, recurrent_fn = _zero_value_game(game)

    def mctx_recurrent_fn(params, rng_key, action, state):
        out, state = recurrent_fn(params, rng_key, action, state)
        return mctx.RecurrentFnOutput(reward=out.reward, discount=out.discount,
                                      prior_logits=out.prior_logits, value=out.value), state

    def search(key):
        root = root_fn(None, key, pgx_game.init(jax.random.PRNGKey(0), 1))
        return mctx.muzero_policy(
            None, key, mctx.RootFnOutput(prior_logits=root.prior_logits, value=root.value,
                                         embedding=root.embedding),
            mctx_recurrent_fn, sims, invalid_actions=~root.legal_action_mask,
            dirichlet_fraction=0.0, temperature=0.0).action

    return jax.jit(search)


def mctsbot_search(game: str, sims: int):
    """``(seed) -> action``: a new ``pyspiel.MCTSBot`` searching the initial state."""
    import pyspiel
    os_game = pyspiel.load_game(game)

    def search(seed):
        evaluator = pyspiel.RandomRolloutEvaluator(1, seed)
        bot = pyspiel.MCTSBot(os_game, evaluator, 2.0, sims, 1000, False, seed, False)
        return bot.step(os_game.new_initial_state())

    return search


def _round_up(sims: int, k: int) -> int:
    """``sims`` rounded up to a multiple of ``k`` (the engine's steps hold ``k`` walks
    each); rates are per simulation actually run."""
    return -(-sims // k) * k


def run_game(game: str, sims: int, reps: int, ks: list[int], variants: list[str]) -> list[dict]:
    fns = {}
    if "mcts" in variants:
        fns["mctsbot (C++, rollout)"] = ("bot", mctsbot_search(game, sims))
    if "zero" in variants:
        fns["jaxpuct zero K=1"] = ("jax", jaxpuct_search(game, sims, "zero", 1))
    if "mctx" in variants:
        fns["mctx.muzero_policy zero"] = ("jax", mctx_search(game, sims))
    if "rollout" in variants:
        for k in ks:
            fns[f"jaxpuct rollout K={k}"] = ("jax", jaxpuct_search(game, _round_up(sims, k),
                                                                   "rollout", k))
    if game == "connect_four" and "lean-zero" in variants:
        fns["jaxpuct zero K=1, lean rules"] = ("jax", jaxpuct_search(game, sims, "zero", 1,
                                                                     "lean"))
    if game == "connect_four" and "lean-rollout" in variants:
        for k in ks:
            fns[f"jaxpuct rollout K={k}, lean rules"] = ("jax", jaxpuct_search(
                game, _round_up(sims, k), "rollout", k, "lean"))
    if "uct-rollout" in variants:
        fns["jaxpuct UCT rollout K=1"] = ("jax", jaxpuct_search(
            game, sims, "rollout", 1, selection=jaxpuct.PUCTConfig.uct()))
    if game == "connect_four" and "lean-uct-rollout" in variants:
        fns["jaxpuct UCT rollout K=1, lean rules"] = ("jax", jaxpuct_search(
            game, sims, "rollout", 1, "lean", selection=jaxpuct.PUCTConfig.uct()))
    compile_s = {}
    for name, (kind, fn) in fns.items():
        start = time.perf_counter()
        if kind == "jax":
            jax.block_until_ready(fn(jax.random.PRNGKey(0)))
        else:
            fn(0)
        compile_s[name] = time.perf_counter() - start
    times = {name: [] for name in fns}
    # Keys are made before the clock starts, as the bot's seeds are: creating one
    # is a dispatch of its own (about 70 us here), not part of the search.
    keys = [jax.block_until_ready(jax.random.PRNGKey(rep + 1)) for rep in range(reps)]
    for rep in range(reps):
        for name, (kind, fn) in fns.items():
            start = time.perf_counter()
            if kind == "jax":
                jax.block_until_ready(fn(keys[rep]))
            else:
                fn(rep + 1)
            times[name].append(time.perf_counter() - start)
    bot = "mctsbot (C++, rollout)"
    bot_rate = sims / statistics.median(times[bot]) if bot in times else float("nan")
    rows = []
    for name, t in times.items():
        k = int(name.split("K=")[1].split(",")[0]) if "rollout K=" in name else 1
        run_sims = _round_up(sims, k)
        rate = run_sims / statistics.median(t)
        rows.append(dict(game=game, search=name, n=len(t), median_s=statistics.median(t),
                         sims_per_s=rate, ratio=rate / bot_rate,
                         spread=(run_sims / max(t), run_sims / min(t)),
                         first_call_s=compile_s[name]))
    return rows


def _ttt_rollout_recurrent_fn():
    """jaxpuct.testing.tictactoe's ``recurrent_fn`` whose leaf value is one uniform
    random rollout to the end of the game (the oracle's own JAX rules)."""
    from jaxpuct.envs import rollouts
    from jaxpuct.envs.adapter import Environment
    from jaxpuct.testing import tictactoe as ttt

    def reward(prev, new):
        # The mover completed a line: its stones are -1 in the new (flipped) view.
        won = jnp.any(jnp.all(new.board[:, ttt.LINES] == -1, axis=-1), axis=-1)
        return jnp.where(~prev.terminal & won, 1.0, 0.0).astype(jnp.float32)

    env = Environment(step=lambda st, a: ttt.step(st, a)[0],
                      observe=lambda st: st.board.astype(jnp.float32),
                      legal_mask=ttt.legal, terminal=lambda st: st.terminal, reward=reward)

    def zero_net(params, obs):
        return jnp.zeros(obs.shape, jnp.float32), jnp.zeros(obs.shape[:1], jnp.float32)

    def recurrent_fn(params, rng_key, action, state):
        out, new_state = ttt.recurrent_fn(params, rng_key, action, state)
        z = rollouts.rollout_return(zero_net, env, None, new_state, rng_key, max_steps=9)
        return out.replace(value=jnp.where(out.terminal, 0.0, z)), new_state

    return recurrent_fn


def ttt_quality(budgets: list[int], ks: list[int], values: list[str]) -> None:
    """Share of minimax-optimal moves (greedy, most visited) over every non-terminal
    tic-tac-toe position (jaxpuct.testing.tictactoe), at equal simulations."""
    from jaxpuct.testing import tictactoe as ttt
    positions = ttt.all_positions()
    state = ttt.batch(positions)
    optimal = [ttt.optimal_moves(p) for p in positions]
    fns = {"zero": ttt.recurrent_fn, "rollout": _ttt_rollout_recurrent_fn()}
    print(f"\ntic-tac-toe, {len(positions)} non-terminal positions: share of minimax-optimal "
          "moves (one search per position, temperature 0)\n")
    print("| value | S | " + " | ".join(f"K = {k}" for k in ks) + " |")
    print("|---|---|" + "---|" * len(ks))
    for value in values:
        for sims in budgets:
            shares = []
            for k in ks:
                run_sims = _round_up(sims, k)
                fn = jax.jit(lambda st, k=k, n=run_sims, rf=fns[value]: jaxpuct.alphazero_policy(
                    None, jax.random.key(0), ttt.root(st), rf, n,
                    dirichlet_fraction=0.0, temperature=0.0, leaves_per_step=k).action)
                action = np.asarray(fn(state))
                shares.append(np.mean([int(a) in o for a, o in zip(action, optimal,
                                                                    strict=True)]))
            print(f"| {value} | {sims} | " + " | ".join(f"{x:.4f}" for x in shares) + " |",
                  flush=True)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sims", type=int, default=1000)
    parser.add_argument("--reps", type=int, default=7)
    parser.add_argument("--games", default="connect_four,tic_tac_toe")
    parser.add_argument("--ks", default="1,4,16")
    parser.add_argument("--variants", default="mcts,zero,rollout")
    parser.add_argument("--quality", default="",
                        help="S budgets (e.g. 64,256): the tic-tac-toe oracle's share of "
                             "optimal moves for each K, instead of the speed runs")
    parser.add_argument("--values", default="zero,rollout", help="with --quality")
    parser.add_argument("--small-loops", type=int, default=0, metavar="BYTES",
                        help="set XLA:CPU's small-while-loop byte threshold for this "
                             "process (0: XLA's default); see the module docstring")
    args = parser.parse_args(argv)
    if args.small_loops:
        # Read when JAX creates its CPU client, which no call above has done yet.
        os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + " --xla_backend_extra_"
                                   f"options=xla_cpu_small_while_loop_byte_threshold="
                                   f"{args.small_loops}").strip()
    ks = [int(k) for k in args.ks.split(",")]
    variants = args.variants.split(",")
    if args.quality:
        ttt_quality([int(x) for x in args.quality.split(",")], ks, args.values.split(","))
        return
    affinity = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else "?"
    print(f"B = 1, S = {args.sims}, {args.reps} rounds; cores {affinity}; "
          f"small-loop threshold {args.small_loops or 'default'}; "
          f"load average {os.getloadavg()[0]:.1f}; jax {jax.__version__}, "
          f"jaxpuct {jaxpuct.__version__}, numpy {np.__version__}")
    print("| game | search | n | median s | sims/s | x vs MCTSBot | min-max sims/s | "
          "first call s |")
    print("|---|---|---|---|---|---|---|---|")
    for game in args.games.split(","):
        for r in run_game(game, args.sims, args.reps, ks, variants):
            print(f"| {r['game']} | {r['search']} | {r['n']} | {r['median_s']:.3g} | "
                  f"{r['sims_per_s']:,.0f} | {r['ratio']:.2f} | {r['spread'][0]:,.0f}-"
                  f"{r['spread'][1]:,.0f} | {r['first_call_s']:.2f} |", flush=True)
    print(f"load average at the end {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
