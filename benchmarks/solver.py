"""MCTS-solver (``solver=True``): exactness and decision quality against oracles.

1. Tic-tac-toe, every reachable non-terminal position (4520), uniform prior, zero
   value (``--ttt-rollouts R``: the mean of R uniform random rollouts instead), exact
   terminals, ``PUCTConfig()``, temperature 0, no noise: the share of
   positions where the move played is minimax-optimal, with and without the solver,
   at S = 64, 200 and 800; with the solver also the share of roots proven and a
   check that every proven node of every tree holds the exact minimax value.
2. Connect four (pgx) end-games: random positions reached by 34 random moves (8
   empty cells, game not over), searched with the same zero network; an exact
   negamax over the remaining moves (checked against OpenSpiel's alpha-beta on the
   first positions) gives the value and the optimal moves. Reported per S: roots
   proven, proven values that are exact, optimal moves, with and without the
   solver (``--graph``: also the solver with graph search, proofs shared through
   transpositions).

3. ``--speed-reps R``: the time of a search with and without the solver where almost
   nothing gets proven (connect four openings, B = 64, S = 128), interleaved.

    python -m benchmarks.solver [--ttt-sims 64 200 800] [--ttt-rollouts 0 1 8]
                                [--c4-sims 100 400 1600]
                                [--graph] [--speed-reps 7]
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

# ----------------------------------------------------------------- tic-tac-toe


def _rollout_recurrent_fn(rollouts: int):
    """Tic-tac-toe with the leaf value of ``rollouts`` uniform random playouts.

    The evaluator of OpenSpiel's ``MCTSBot`` (``RandomRolloutEvaluator``), averaged
    over ``rollouts`` playouts; the playouts draw from the key the search hands to
    ``recurrent_fn``.
    """

    def playout(state: tictactoe.State, key: jax.Array) -> jax.Array:
        def body(_, carry):
            state, total, sign, key = carry
            key, sub = jax.random.split(key)
            noise = jax.random.gumbel(sub, state.board.shape)
            action = jnp.argmax(jnp.where(tictactoe.legal(state), noise, -jnp.inf), -1)
            already_over = state.terminal
            state, reward, _ = tictactoe.step(state, action)
            total = total + jnp.where(already_over, 0.0, sign * reward)
            return state, total, -sign, key

        zeros = jnp.zeros(state.board.shape[:1], jnp.float32)
        # Returns from the view of the player to move at the leaf: their own moves
        # count +, the opponent's -.
        _, total, _, _ = jax.lax.fori_loop(
            0, tictactoe.NUM_ACTIONS, body, (state, zeros, jnp.ones_like(zeros), key))
        return total

    def recurrent_fn(params, key, action, state):
        out, new_state = tictactoe.recurrent_fn(params, key, action, state)
        keys = jax.random.split(key, rollouts)
        value = jnp.mean(jax.vmap(lambda k: playout(new_state, k))(keys), axis=0)
        return out.replace(value=jnp.where(new_state.terminal, 0.0, value)), new_state

    return recurrent_fn


def ttt(budgets: list[int], rollouts: int = 0) -> None:
    recurrent_fn = (tictactoe.recurrent_fn if rollouts == 0
                    else _rollout_recurrent_fn(rollouts))
    positions = tictactoe.all_positions()
    state = tictactoe.batch(positions)
    optimal = [tictactoe.optimal_moves(p) for p in positions]
    value = "zero value" if rollouts == 0 else f"value = mean of {rollouts} random rollouts"
    print(f"tic-tac-toe, {len(positions)} positions, {value}: minimax-optimal move share")
    for sims in budgets:
        for solver in (False, True):
            fn = jax.jit(lambda s, sims=sims, solver=solver: jaxpuct.alphazero_policy(
                None, jax.random.key(0), tictactoe.root(s), recurrent_fn, sims,
                dirichlet_fraction=0.0, temperature=0.0, solver=solver))
            start = time.perf_counter()
            out = jax.block_until_ready(fn(state))
            seconds = time.perf_counter() - start
            action = np.asarray(out.action)
            share = np.mean([int(a) in o for a, o in zip(action, optimal, strict=True)])
            line = f"  S = {sims:4d} solver = {solver!s:5}: {share:.4f}"
            if solver:
                tree = out.search_tree
                proven, wrong = _ttt_proof_check(tree)
                line += (f", roots proven {proven:.4f}, proven nodes not exact: {wrong}, "
                         f"mean root visits {np.mean(np.asarray(tree.node_visits[:, 0])):.0f}")
            print(line + f" ({seconds:.1f} s incl. compile)", flush=True)


def _ttt_proof_check(tree) -> tuple[float, int]:
    emb = jax.device_get(tree.embeddings)
    absolute = emb.board.astype(np.int64) * emb.player.astype(np.int64)[..., None]
    codes = np.where(absolute == -1, 2, absolute) @ (3 ** np.arange(9))
    exact = tictactoe.value_table()[codes]
    plies = np.asarray(tree.proof_plies)
    used = np.arange(plies.shape[1])[None, :] < np.asarray(tree.num_nodes)[:, None]
    proven = used & (plies >= 0)
    wrong = int(np.sum(proven & (np.asarray(tree.node_values) != exact)))
    return float(np.mean(proven[:, 0])), wrong


# ---------------------------------------------------------------- connect four

ROWS, COLS = 6, 7


def _c4_wins(board: list[list[int]], row: int, col: int) -> bool:
    """Whether the stone just placed at ``(row, col)`` completes four."""
    me = board[row][col]
    for dr, dc in ((0, 1), (1, 0), (1, 1), (1, -1)):
        count = 1
        for sign in (1, -1):
            r, c = row + sign * dr, col + sign * dc
            while 0 <= r < ROWS and 0 <= c < COLS and board[r][c] == me:
                count += 1
                r, c = r + sign * dr, c + sign * dc
        if count >= 4:
            return True
    return False


def _c4_negamax(board: list[list[int]], heights: list[int], me: int, memo: dict) -> int:
    """Exact value (+1/0/-1) for ``me`` to move (Knuth & Moore 1975), memoised."""
    key = (tuple(map(tuple, board)), me)
    if key in memo:
        return memo[key]
    best = None
    for col in range(COLS):
        row = heights[col]
        if row >= ROWS:
            continue
        board[row][col] = me
        heights[col] += 1
        if _c4_wins(board, row, col):
            value = 1
        elif all(h >= ROWS for h in heights):
            value = 0
        else:
            value = -_c4_negamax(board, heights, -me, memo)
        heights[col] -= 1
        board[row][col] = 0
        best = value if best is None else max(best, value)
        if best == 1:
            break
    memo[key] = best
    return best


def c4_exact(moves: list[int]) -> tuple[int, set[int]]:
    """Value for the player to move after ``moves`` (columns) and the optimal moves."""
    board = [[0] * COLS for _ in range(ROWS)]
    heights = [0] * COLS
    me = 1
    for col in moves:
        board[heights[col]][col] = me
        heights[col] += 1
        me = -me
    memo: dict = {}
    qs = {}
    for col in range(COLS):
        row = heights[col]
        if row >= ROWS:
            continue
        board[row][col] = me
        heights[col] += 1
        if _c4_wins(board, row, col):
            qs[col] = 1
        elif all(h >= ROWS for h in heights):
            qs[col] = 0
        else:
            qs[col] = -_c4_negamax(board, heights, -me, memo)
        heights[col] -= 1
        board[row][col] = 0
    value = max(qs.values())
    return value, {c for c, q in qs.items() if q == value}


def _openspiel_value(moves: list[int]) -> int:
    import pyspiel
    from open_spiel.python.algorithms import minimax

    game = pyspiel.load_game("connect_four")
    state = game.new_initial_state()
    for col in moves:
        state.apply_action(col)
    player = state.current_player()
    value, _ = minimax.alpha_beta_search(game, state, maximizing_player_id=player)
    return int(round(value))


def c4_positions(count: int, num_moves: int, seed: int = 0):
    """``count`` pgx states after ``num_moves`` random moves with the game not over,
    and their move lists."""
    import pgx

    env = pgx.make("connect_four")
    batch = 64 * count  # about 4% of random games last 34 moves

    @jax.jit
    def play(key):
        keys = jax.random.split(key, batch)
        state = jax.vmap(env.init)(keys)

        def body(i, carry):
            state, moves, key = carry
            key, sub = jax.random.split(key)
            logits = jnp.where(state.legal_action_mask, 0.0, -jnp.inf)
            action = jax.random.categorical(sub, logits)
            moves = moves.at[:, i].set(action)
            return jax.vmap(env.step)(state, action), moves, key

        moves = jnp.zeros((batch, num_moves), jnp.int32)
        state, moves, _ = jax.lax.fori_loop(0, num_moves, body, (state, moves, key))
        return state, moves

    state, moves = play(jax.random.key(seed))
    ok = np.flatnonzero(~np.asarray(state.terminated))[:count]
    if ok.size < count:
        raise RuntimeError(f"only {ok.size} of {batch} random games lasted {num_moves} moves")
    take = functools.partial(jnp.take, indices=jnp.asarray(ok), axis=0)
    return jax.tree.map(take, state), [list(map(int, m)) for m in np.asarray(moves)[ok]]


def _c4_zero_network_fns():
    """Connect four's ``(root_fn, recurrent_fn)`` with a uniform prior and zero value."""
    from jaxpuct.envs import adapter, pgx_games
    from jaxpuct.testing.pure_search import zero_apply

    game = pgx_games.make_pgx_game("connect_four")
    apply_fn = zero_apply(game.num_actions)
    return (adapter.make_root_fn(apply_fn, game.environment),
            adapter.make_recurrent_fn(apply_fn, game.environment))


def connect_four(count: int, budgets: list[int], num_moves: int = 34,
                 graph: bool = False) -> None:
    root_fn, recurrent_fn = _c4_zero_network_fns()
    state, moves = c4_positions(count, num_moves)
    start = time.perf_counter()
    exact = [c4_exact(m) for m in moves]
    print(f"connect four: {count} positions after {num_moves} random moves "
          f"({42 - num_moves} empty cells); exact negamax in "
          f"{time.perf_counter() - start:.1f} s")
    checked = min(5, count)
    agree = sum(_openspiel_value(m) == v for m, (v, _) in zip(moves[:checked], exact,
                                                               strict=False))
    print(f"  negamax == OpenSpiel alpha_beta_search on {agree} of {checked} positions")
    values = np.array([v for v, _ in exact])
    print(f"  exact values: {np.sum(values == 1)} wins, {np.sum(values == 0)} draws, "
          f"{np.sum(values == -1)} losses for the player to move")
    modes = [(False, None), (True, None)] + ([(True, jaxpuct.GraphConfig())] if graph else [])
    for sims in budgets:
        for solver, graph_config in modes:
            fn = jax.jit(lambda s, sims=sims, solver=solver, g=graph_config:
                         jaxpuct.alphazero_policy(
                             None, jax.random.key(0), root_fn(None, None, s), recurrent_fn,
                             sims, dirichlet_fraction=0.0, temperature=0.0, solver=solver,
                             graph=g))
            start = time.perf_counter()
            out = jax.block_until_ready(fn(state))
            seconds = time.perf_counter() - start
            action = np.asarray(out.action)
            good = np.mean([int(a) in o for a, (_, o) in zip(action, exact, strict=True)])
            line = (f"  S = {sims:5d} solver = {solver!s:5}{' graph' if graph_config else ''}"
                    f": optimal moves {good:.3f}")
            if solver:
                tree = out.search_tree
                proven = np.asarray(tree.proof_plies[:, 0]) >= 0
                root_value = np.asarray(tree.node_values[:, 0])
                exact_ok = np.sum(root_value[proven] == values[proven])
                line += (f", roots proven {int(proven.sum())}/{count} "
                         f"({proven.mean():.3f}), proven values exact {exact_ok}/"
                         f"{int(proven.sum())}, mean root visits "
                         f"{np.mean(np.asarray(tree.node_visits[:, 0])):.0f}")
            print(line + f" ({seconds:.1f} s incl. compile)", flush=True)


def speed(reps: int, batch: int = 64, sims: int = 128) -> None:
    """Cost of the solver where little is proven: connect four openings, zero net."""
    import statistics

    import pgx

    root_fn, recurrent_fn = _c4_zero_network_fns()
    state = jax.vmap(pgx.make("connect_four").init)(jax.random.split(jax.random.key(0), batch))
    fns = {solver: jax.jit(lambda s, solver=solver: jaxpuct.alphazero_policy(
        None, jax.random.key(0), root_fn(None, None, s), recurrent_fn, sims,
        temperature=0.0, solver=solver)) for solver in (False, True)}
    times = {False: [], True: []}
    for fn in fns.values():
        jax.block_until_ready(fn(state))
    for _ in range(reps):  # interleaved, so that load changes hit both alike
        for solver, fn in fns.items():
            start = time.perf_counter()
            jax.block_until_ready(fn(state))
            times[solver].append(time.perf_counter() - start)
    off, on = statistics.median(times[False]), statistics.median(times[True])
    proven = float(np.mean(np.asarray(fns[True](state).search_tree.proof_plies[:, 0]) >= 0))
    print(f"speed, connect four openings, B = {batch}, S = {sims} (median of {reps}): "
          f"solver off {off * 1e3:.0f} ms, on {on * 1e3:.0f} ms ({on / off:.2f}x); "
          f"roots proven {proven:.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ttt-sims", type=int, nargs="*", default=[64, 200, 800])
    parser.add_argument("--ttt-rollouts", type=int, nargs="*", default=[0],
                        help="tic-tac-toe leaf values: 0 = zero value, R = mean of R "
                             "uniform random rollouts (OpenSpiel MCTSBot's evaluator)")
    parser.add_argument("--c4-sims", type=int, nargs="*", default=[100, 400, 1600])
    parser.add_argument("--c4-positions", type=int, default=100)
    parser.add_argument("--speed-reps", type=int, default=0)
    parser.add_argument("--graph", action="store_true",
                        help="connect four: also the solver with graph search")
    args = parser.parse_args()
    print(f"jax {jax.__version__}, {jax.devices()[0].platform}")
    for rollouts in args.ttt_rollouts if args.ttt_sims else []:
        ttt(args.ttt_sims, rollouts)
    if args.c4_sims:
        connect_four(args.c4_positions, args.c4_sims, graph=args.graph)
    if args.speed_reps:
        speed(args.speed_reps)


if __name__ == "__main__":
    main()
