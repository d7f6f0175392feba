"""A jaxpuct search against OpenSpiel's MCTSBot (or random bot) at backgammon.

    # both with 100 simulations: jaxpuct per micro-move (one checker), MCTSBot per move
    python -m examples.arena_backgammon --simulations 100 --opponent-simulations 100 \\
        --games 16
    # a network trained by examples/known_chance_backgammon.py --run-dir DIR
    python -m examples.arena_backgammon --checkpoint DIR --games 64

Without ``--checkpoint`` jaxpuct's side is a pure search (uniform prior, ``--value``);
with it, the search uses the saved network's prior and value (``--value`` is unused).

pgx's backgammon (``jaxpuct.envs.pgx_backgammon``, searched by
``jaxpuct.stochastic_policy``) against OpenSpiel's, the same dice on both sides, every
move, position and result cross-checked (``jaxpuct/alphazero/arena_backgammon.py``).
Prints W/D/L by colour with the score's 95% Wilson interval and the points per game.
Needs OpenSpiel: ``pip install 'jaxpuct[openspiel]'``.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time

from jaxpuct.alphazero import arena
from jaxpuct.alphazero import arena_backgammon as ab


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m examples.arena_backgammon",
                                description=__doc__.splitlines()[0],
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--simulations", type=int, default=100,
                   help="jaxpuct's simulations per micro-move search")
    p.add_argument("--value", choices=("zero", "rollouts"), default=None,
                   help="the pure search's leaf value (default rollouts); with "
                        "--checkpoint the network's, and recorded as 'network'")
    p.add_argument("--chance-backup", choices=("visits", "expectation"),
                   default="expectation")
    p.add_argument("--chance-ties", choices=("first", "random", "shared"), default="first",
                   help="which of the equally likely rolls a chance node of the tree takes "
                        "first: the lowest-index (1-2, 1-3, ...), one at random at every "
                        "visit, or the first in a random order drawn once per search (the "
                        "same at every chance node: sibling moves see the same rolls)")
    p.add_argument("--tie-break", choices=("first", "random"), default="first",
                   help="the pure search's ties at decision nodes (UCT's untried "
                        "micro-moves): the lowest index first, or a random order as "
                        "MCTSBot's (jaxpuct.PUCTConfig.tie_break)")
    p.add_argument("--selection", choices=("uct", "puct", "gumbel"), default=None,
                   help="the pure search's rule: UCT as MCTSBot's (jaxpuct.PUCTConfig.uct, "
                        "c = 2), AlphaZero's PUCT with a uniform prior, or a Gumbel root "
                        "without noise (sequential halving over every legal micro-move; "
                        "jaxpuct.stochastic_gumbel_policy) (default: uct)")
    p.add_argument("--rules", choices=("standard", "pgx"), default="standard",
                   help="legal micro-moves inside jaxpuct's tree: the standard dice rule "
                        "(OpenSpiel's) or pgx's looser one; the root's are OpenSpiel's")
    p.add_argument("--reuse-within-turn", action="store_true",
                   help="search once per OpenSpiel move (--simulations), and continue that "
                        "tree for the move's second micro-move")
    p.add_argument("--reuse-simulations", type=int, default=0,
                   help="with --reuse-within-turn: simulations added to the continued tree "
                        "(0: its most visited micro-move)")
    p.add_argument("--solver", action="store_true",
                   help="the pure search runs the MCTS-solver alongside (as MCTSBot's solve)")
    p.add_argument("--checkpoint", default=None,
                   help="run directory of examples.known_chance_backgammon: search with "
                        "its network")
    p.add_argument("--opponent", choices=("mcts", "random"), default="mcts")
    p.add_argument("--opponent-simulations", type=int, default=100)
    p.add_argument("--uct-c", type=float, default=2.0)
    p.add_argument("--solve", action=argparse.BooleanOptionalAction, default=True)
    p.add_argument("--games", type=int, default=16, help="games, half per colour")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", help="also write the result to this file")
    return p


def main(argv: list[str] | None = None) -> None:
    args = build_parser().parse_args(argv)
    if args.games < 2 or args.games % 2:
        sys.exit(f"error: --games must be even and at least 2, got {args.games}")
    if args.checkpoint is not None and args.value is not None:
        sys.exit("error: --value is the pure search's; with --checkpoint the network "
                 "gives the value")
    args.value = args.value or ("rollouts" if args.checkpoint is None else "network")
    if args.checkpoint is None:
        args.selection = args.selection or "uct"  # recorded in --json as searched
        agent, description = ab.pure_search_agent(
            args.simulations, args.value, args.chance_backup, rules=args.rules,
            selection=args.selection, reuse_within_turn=args.reuse_within_turn,
            reuse_simulations=args.reuse_simulations, solver=args.solver,
            chance_ties=args.chance_ties, tie_break=args.tie_break)
    else:
        if args.solver:
            sys.exit("error: --solver is the pure search's")
        if args.tie_break != "first":
            sys.exit("error: --tie-break is the pure search's; with --checkpoint the "
                     "search is PUCT over the network's prior")
        if args.selection is not None:
            sys.exit("error: --selection is the pure search's; with --checkpoint the "
                     "network's prior is searched with PUCT")
        if args.chance_backup != "expectation":
            sys.exit("error: --checkpoint searches with --chance-backup expectation")
        from examples import known_chance_backgammon as kcb
        config, graphdef, params = kcb.load_params(args.checkpoint)
        agent, description = ab.network_search_agent(
            kcb.make_apply(graphdef), params, args.simulations, args.rules,
            config.value_scale, name=f"the network of {args.checkpoint}",
            reuse_within_turn=args.reuse_within_turn,
            reuse_simulations=args.reuse_simulations, chance_ties=args.chance_ties)
    bot = arena.BotSpec(kind=args.opponent, simulations=args.opponent_simulations,
                        uct_c=args.uct_c, solve=args.solve)
    print(f"{description}\nagainst {bot.describe()}, {args.games} games", flush=True)
    tic = time.perf_counter()
    result = ab.play_match(agent, bot, args.games, seed=args.seed,
                           progress=lambda line: print(
                               f"[{time.perf_counter() - tic:7.1f} s] {line}", flush=True))
    print(result.report())
    print(f"{result.match.seconds:.0f} s ({result.match.bot_seconds:.0f} s in the bot), "
          f"{result.agent_searches} searches for {result.agent_moves} OpenSpiel moves, "
          f"{int(result.match.plies.sum())} micro-moves, "
          f"{result.bar_backgammons} backgammons from the bar (OpenSpiel 3, pgx 2)")
    simulations = agent_simulations(agent, args.simulations, result)
    print(f"jaxpuct's simulations: {simulations} in all, "
          f"{simulations / max(result.agent_moves, 1):.1f} per OpenSpiel move it made"
          + (f" ({agent.searches} searches, {agent.reused} micro-moves from a continued "
             f"tree, {agent.fallbacks} fresh searches where the continued tree had none)"
             if isinstance(agent, ab.TurnReusingSearch) else ""))
    if args.json:
        total = result.match.total
        with open(args.json, "w") as f:
            json.dump({"args": vars(args), "agent": description, "bot": bot.describe(),
                       "first": dataclasses.asdict(result.match.first),
                       "second": dataclasses.asdict(result.match.second),
                       "total": dataclasses.asdict(total),
                       "points": result.points.tolist(),
                       "plies": result.match.plies.tolist(),
                       "seconds": result.match.seconds,
                       "bot_seconds": result.match.bot_seconds,
                       "agent_searches": result.agent_searches,
                       "agent_moves": result.agent_moves,
                       "agent_simulations": simulations,
                       "bar_backgammons": result.bar_backgammons,
                       "game_records": game_records(result)}, f, indent=1)


def agent_simulations(agent, simulations: int, result: ab.BackgammonResult) -> int:
    """Simulations (one rollout or network call each) the agent spent in the match."""
    if isinstance(agent, ab.TurnReusingSearch):
        return agent.simulations
    return simulations * result.agent_searches


def game_records(result: ab.BackgammonResult) -> list[dict]:
    """Each game of the match for ``--json``: who moved first, the agent's points and
    OpenSpiel's history of the game, dice included (``pyspiel`` replays it)."""
    assert result.match.agent_first is not None
    return [{"agent_first": bool(first), "points": float(points),
             "openspiel_history": list(history)}
            for first, points, history in zip(result.match.agent_first, result.points,
                                               result.histories, strict=True)]


if __name__ == "__main__":
    main()
