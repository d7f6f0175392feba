"""Backgammon in the OpenSpiel arena: move translation, lockstep cross-checks."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import search_cases as sc

pyspiel = pytest.importorskip("pyspiel")
pytest.importorskip("pgx")

from jaxpuct.alphazero import arena  # noqa: E402
from jaxpuct.alphazero import arena_backgammon as ab  # noqa: E402
from jaxpuct.envs import pgx_backgammon as bg  # noqa: E402

# The random games below take about 700 calls of pgx's rules. Compiled at the suite's
# optimisation level 0 the calls alone took 11.8 s (one core), optimised 1.3 s; the
# optimised compiles cost about 3 s, so the test went from 11.4 to 4.0 CPU-s.
_STEP = sc.jit_optimised(bg.step)
_STANDARD_MASK = sc.jit_optimised(bg.standard_legal_mask)
_PGX_SEQUENCES = sc.jit_optimised(ab.pgx_sequences.__wrapped__)


def _random_positions(seed: int, count: int):
    """OpenSpiel decision nodes along one random game (with its chance draws)."""
    rng = np.random.default_rng(seed)
    state = ab.load_openspiel_game().new_initial_state()
    out = []
    while not state.is_terminal() and len(out) < count:
        if state.is_chance_node():
            outcomes, probs = zip(*state.chance_outcomes(), strict=True)
            state.apply_action(int(rng.choice(outcomes, p=probs)))
            continue
        out.append(state.clone())
        state.apply_action(int(rng.choice(state.legal_actions())))
    return out


def test_openspiel_actions_round_trip_through_pgx_micro_moves():
    """Every legal OpenSpiel action of a random game -> pgx micro-moves -> the same
    action, as OpenSpiel's own ``checker_moves_to_spiel_move`` decodes and encodes it;
    pgx's micro-moves name the same checkers and dice as OpenSpiel's."""
    checked = doubles = passes = 0
    for state in _random_positions(seed=0, count=400):
        player, dice = state.current_player(), ab.openspiel_dice(state)
        doubles += dice[0] == dice[1]
        for action in state.legal_actions():
            moves = state.spiel_move_to_checker_moves(player, action)
            assert state.checker_moves_to_spiel_move(moves) == action
            micro = ab.pgx_micro_moves(state, action)
            assert ab.openspiel_action(player, dice, micro) == action
            for move, m in zip(moves, micro, strict=False):  # micro stops at a pass
                if move.pos == -1:
                    assert m // 6 == 0  # a pass is pgx's no-op
                    passes += 1
                    continue
                assert m % 6 + 1 == move.num
                point = move.pos if player == 0 else 23 - move.pos
                assert m // 6 == (1 if move.pos == 100 else 2 + point)
            checked += 1
    assert checked > 1000 and doubles > 0 and passes > 0


def test_opening_board_from_the_movers_view():
    state = ab.load_openspiel_game().new_initial_state()
    state.apply_action(1)  # "O starts, roll 21"
    assert state.current_player() == 1
    board = ab.openspiel_board(state)
    expected = np.zeros(28, int)
    expected[[0, 11, 16, 18]] = [2, 5, 3, 5]  # pgx's _make_init_board
    expected[[5, 7, 12, 23]] = [-5, -3, -5, -2]
    np.testing.assert_array_equal(board, expected)
    assert ab.openspiel_dice(state) == (1, 2)


def test_random_games_agree_move_by_move():
    """Random agents on both sides, to the end: same dice, positions, players, legal
    turns (pgx's under OpenSpiel's rule) at every OpenSpiel move, same results."""
    result = ab.play_match(ab.random_agent(0), arena.BotSpec(kind="random"), num_games=2,
                           seed=1)
    assert result.match.total.games == 2 and 0 < result.agent_searches < 2 * result.agent_moves
    assert set(np.abs(result.points)) <= {1.0, 2.0, 3.0}
    assert (result.match.plies > 50).all()
    # Each game's record replays in OpenSpiel to its end and to the agent's points.
    np.testing.assert_array_equal(result.match.agent_first, [True, False])
    np.testing.assert_array_equal(result.match.outcome, np.sign(result.points))
    game = ab.load_openspiel_game()
    for g, history in enumerate(result.histories):
        state = game.new_initial_state()
        state.apply_action(history[0])  # the opening roll decides who moves first
        first = state.current_player()
        agent = first if result.match.agent_first[g] else 1 - first
        for action in history[1:]:
            state.apply_action(action)
        assert state.is_terminal(), g
        assert state.returns()[agent] == result.points[g], (g, state.returns())


def test_openspiel_filter_applies_the_dice_rules():
    """pgx allows a first move after which the other die cannot be played; OpenSpiel
    keeps only two-move turns, or, when one move is the most, the larger die."""
    first = np.zeros(156, bool)
    stops = np.zeros(156, bool)
    second = np.zeros((156, 156), bool)
    a, b, c = 6 * 2 + 0, 6 * 5 + 3, 6 * 7 + 3  # die 1 from point 0; die 4 from 3 and 5
    first[[a, b, c]] = True
    second[a, 0:6] = True  # after a: stuck (only the no-op)
    second[b, 6 * 4 + 0] = True  # after b: die 1 from point 2
    second[c, 0:6] = True
    assert ab.openspiel_filter(first, stops, second) == [(b, 6 * 4 + 0)]
    second[b] = False
    second[b, 0:6] = True  # no two-move turn: only the larger die (4)
    assert ab.openspiel_filter(first, stops, second) == [(b, 0), (c, 0)]
    first[:] = False
    first[0:6] = True  # stuck from the start: OpenSpiel's pass
    assert ab.openspiel_filter(first, stops, second) == [(0,)]


@pytest.mark.slow
def test_standard_mask_allows_the_prefixes_of_openspiels_turns():
    """``standard_legal_mask`` (the search's rules, in JAX) against the turns that
    ``openspiel_filter`` keeps of pgx's sequences (checked against OpenSpiel's own
    legal actions above and in every match), at every micro-move of random games:
    at the first micro-move of a turn or of a double's half, exactly the first moves
    of those turns; later, pgx's mask. The games include positions where pgx allows
    more, so a mask without the rule fails. (Two games at a time, through the
    arena's own functions, compiled with XLA's optimisations.)"""
    rng = np.random.default_rng(0)
    narrowed = checked = 0
    for seed in range(3):
        state = bg.init(jax.random.PRNGKey(seed), 2)
        while not np.asarray(state.terminated).all():
            standard = np.asarray(_STANDARD_MASK(state))
            first, stops, second = jax.device_get(_PGX_SEQUENCES(state))
            pgx_mask, live, played, dice = jax.device_get(
                (state.legal_action_mask, ~state.terminated, state._played_dice_num,
                 state._dice))
            for g in np.flatnonzero(live):
                if played[g] == 0 or (dice[g, 0] == dice[g, 1] and played[g] == 2):
                    turns = ab.openspiel_filter(first[g], stops[g], second[g])
                    expected = {t[0] for t in turns}
                else:
                    expected = {int(a) if a // 6 else ab.NO_OP for a in np.flatnonzero(pgx_mask[g])}
                got = {int(a) if a // 6 else ab.NO_OP for a in np.flatnonzero(standard[g])}
                assert got == expected, (seed, g, sorted(got), sorted(expected))
                narrowed += not np.array_equal(standard[g], pgx_mask[g])
                checked += 1
            actions = [rng.choice(np.flatnonzero(m)) for m in pgx_mask]
            rolls = rng.choice(bg.NUM_OUTCOMES, size=2, p=np.asarray(bg.DICE_PROBS))
            state = _STEP(state, jnp.asarray(actions, jnp.int32), jnp.asarray(rolls))
    assert checked > 1000 and narrowed > 0, (checked, narrowed)


def test_mismatches_are_caught(monkeypatch):
    state = _random_positions(seed=2, count=3)[-1]
    turns = [ab.pgx_micro_moves(state, a) for a in state.legal_actions()]
    with pytest.raises(arena.ArenaMismatchError, match="game 5, .*: legal turns differ"):
        ab.check_legal_sets(state, turns[1:], "backgammon game 5, micro-move 9")
    board = ab.openspiel_board(state)
    dice = np.asarray(ab.openspiel_dice(state)) - 1
    board[24] += 1
    with pytest.raises(arena.ArenaMismatchError, match="boards differ"):
        ab._check_position(state, board, dice, state.current_player(), "here")
    with pytest.raises(arena.ArenaMismatchError, match="OpenSpiel player"):
        ab._check_position(state, ab.openspiel_board(state), dice,
                           1 - state.current_player(), "here")
    # pgx rolls other dice than OpenSpiel: caught at the next OpenSpiel move.
    rolls = ab._rolls

    def shifted(os_game):
        opening, dice, probs = rolls(os_game)
        return opening, dice[1:] + dice[:1], probs

    monkeypatch.setattr(ab, "_rolls", shifted)
    with pytest.raises(arena.ArenaMismatchError, match="dice differ"):
        ab.play_match(ab.random_agent(0), arena.BotSpec(kind="random"), num_games=2, seed=1)


@pytest.mark.slow
@pytest.mark.parametrize("tie_break", ["first", "random"])
def test_pure_search_agent_moves_within_the_given_mask(tie_break):
    """The stochastic search over the pgx split picks one of the micro-moves it is
    given (the arena's narrowing to OpenSpiel's turns), not any pgx move, whichever
    way its ties are broken."""
    import jax

    from jaxpuct.envs import pgx_backgammon as bg
    agent, description = ab.pure_search_agent(4, tie_break=tie_break)
    ties = "" if tie_break == "first" else ", ties random"
    assert description.startswith(f"jaxpuct pure stochastic UCT search (c = 2{ties}, 4 "
                                  "simulations")
    state = bg.init(jax.random.PRNGKey(0), 1)
    legal = np.asarray(state.legal_action_mask)
    options = np.flatnonzero(legal[0])
    narrowed = np.zeros_like(legal)
    narrowed[0, options[-2:]] = True
    action = int(np.asarray(agent(jax.random.split(jax.random.PRNGKey(1), 1), state,
                                  narrowed))[0])
    assert action in options[-2:]


def test_cli_arguments():
    """The example's flags parse to what the match is given, and a number of games
    that cannot be split evenly between the colours is refused before anything is
    compiled."""
    from examples import arena_backgammon as cli
    args = cli.build_parser().parse_args(
        ["--simulations", "8", "--value", "zero", "--chance-backup", "visits",
         "--opponent", "random", "--no-solve", "--games", "4", "--seed", "3",
         "--rules", "pgx"])
    assert (args.simulations, args.value, args.chance_backup, args.opponent, args.solve,
            args.games, args.seed, args.rules) == (8, "zero", "visits", "random", False, 4,
                                                   3, "pgx")
    defaults = cli.build_parser().parse_args([])
    assert (defaults.value, defaults.chance_backup, defaults.opponent, defaults.solve,
            defaults.rules) == (None, "expectation", "mcts", True, "standard")
    # None is read as rollouts for the pure search; a checkpoint's network gives the
    # value itself, so --value beside it is refused.
    with pytest.raises(SystemExit, match="with --checkpoint the network gives the value"):
        cli.main(["--checkpoint", "unused", "--value", "zero"])
    with pytest.raises(SystemExit, match="--selection is the pure search's"):
        cli.main(["--checkpoint", "unused", "--selection", "puct"])
    assert cli.build_parser().parse_args(["--selection", "puct"]).selection == "puct"
    reuse = cli.build_parser().parse_args(["--reuse-within-turn", "--reuse-simulations", "7"])
    assert (reuse.reuse_within_turn, reuse.reuse_simulations) == (True, 7)
    assert (defaults.reuse_within_turn, defaults.reuse_simulations) == (False, 0)
    with pytest.raises(ValueError, match="reuse_simulations must be >= 0 and needs"):
        cli.main(["--reuse-simulations", "5"])
    assert cli.build_parser().parse_args(["--solver"]).solver and not defaults.solver
    with pytest.raises(SystemExit, match="--solver is the pure search's"):
        cli.main(["--checkpoint", "unused", "--solver"])
    assert ab.pure_search_agent(4, solver=True)[1].endswith("rules in the tree, MCTS-solver), "
                                                           "greedy")
    ties = cli.build_parser().parse_args(["--chance-ties", "random"])
    assert (ties.chance_ties, defaults.chance_ties) == ("random", "first")
    assert "chance_ties=random" in ab.pure_search_agent(4, chance_ties="random")[1]
    assert "chance_ties" not in ab.pure_search_agent(4)[1]
    assert cli.build_parser().parse_args(["--tie-break", "random"]).tie_break == "random"
    assert defaults.tie_break == "first"
    with pytest.raises(SystemExit, match="--tie-break is the pure search's"):
        cli.main(["--checkpoint", "unused", "--tie-break", "random"])
    with pytest.raises(ValueError, match="selection must be 'uct' or 'puct', got 'ucb1'"):
        ab.pure_search_agent(4, selection="ucb1")
    assert cli.build_parser().parse_args(["--selection", "gumbel"]).selection == "gumbel"
    assert ab.pure_search_agent(4, selection="gumbel")[1].startswith(
        "jaxpuct pure stochastic Gumbel root search (sequential halving over every legal "
        "micro-move, 4 simulations")
    with pytest.raises(ValueError, match="tie_break is UCT's and PUCT's"):
        ab.pure_search_agent(4, selection="gumbel", tie_break="random")
    for games in ("3", "0"):
        with pytest.raises(SystemExit, match="--games must be even and at least 2"):
            cli.main(["--games", games])
    with pytest.raises(SystemExit):  # argparse refuses a value outside the choices
        cli.build_parser().parse_args(["--value", "network"])
    with pytest.raises(ValueError, match="rules must be one of .*'openspiel'"):
        bg.make_search_fns(rules="openspiel")


def _check_turn_reuse(agent, simulations: int, ties_by_value: bool = False) -> None:
    """The second micro-move of an OpenSpiel move is the most visited legal micro-move
    of the first search's decision node under (the move played, the within-turn
    outcome 0), read here from the first tree's own arrays (``ties_by_value``: one of
    the most visited, as the solver's move breaks ties by value); a call at another
    OpenSpiel move searches afresh; the simulations spent are counted."""
    state = bg.init(jax.random.PRNGKey(3), 1)
    assert int(state._dice[0, 0]) != int(state._dice[0, 1])  # two micro-moves to play
    legal = np.asarray(state.legal_action_mask)
    keys = jax.random.split(jax.random.PRNGKey(1), 1)
    first = int(np.asarray(agent(keys, state, legal, ab.TurnView(0, 1, ())))[0])
    assert legal[0, first]
    assert (agent.searches, agent.reused, agent.simulations) == (1, 0, simulations)
    tree = agent._last[0][2]
    after = _STEP(state, jnp.asarray([first]), jnp.asarray([0]))
    assert int(after.current_player[0]) == int(state.current_player[0])  # still its turn
    legal2 = np.asarray(after.legal_action_mask)
    assert legal2[0].sum() > 1
    # The oracle: walk the first tree by hand (decision edge, then chance outcome 0).
    children = np.asarray(tree.children_index[0])
    node = children[children[0, first], 0]
    assert node > 0
    visits = np.where(legal2[0], np.asarray(tree.edge_visits[0, node, :ab.NUM_ACTIONS]), -1)
    assert visits.max() > 0
    second = int(np.asarray(agent(keys, after, legal2, ab.TurnView(0, 1, (first,))))[0])
    if ties_by_value:
        assert visits[second] == visits.max(), (second, visits)
    else:
        assert second == int(np.argmax(visits))
    assert (agent.searches, agent.reused, agent.simulations) == (1, 1, simulations)
    # The same micro-moves at another OpenSpiel move: a fresh search, not the stale tree.
    agent(keys, after, legal2, ab.TurnView(0, 9, (first,)))
    assert (agent.searches, agent.reused, agent.simulations) == (2, 1, 2 * simulations)


def test_a_search_per_openspiel_move_continues_its_tree_for_the_second_micro_move():
    """The pure search with ``reuse_within_turn`` (see :func:`_check_turn_reuse`)."""
    agent, description = ab.pure_search_agent(40, value="zero", rules="pgx",
                                              reuse_within_turn=True)
    assert "40 simulations per OpenSpiel move" in description
    with pytest.raises(ValueError, match="reuse_simulations must be >= 0 and needs"):
        ab.pure_search_agent(40, reuse_simulations=5)
    _check_turn_reuse(agent, 40)


@pytest.mark.slow
def test_the_network_search_continues_its_tree_within_a_turn_too():
    """The same with a (untrained) network's prior and value: the search's tree is
    continued as the pure search's is."""
    from flax import nnx

    from examples import known_chance_backgammon as kcb
    graphdef, params = nnx.split(kcb.make_network(kcb.Config(), nnx.Rngs(0)))
    agent, description = ab.network_search_agent(kcb.make_apply(graphdef), params, 40,
                                                 rules="pgx", reuse_within_turn=True)
    assert "40 simulations per OpenSpiel move" in description
    _check_turn_reuse(agent, 40)


@pytest.mark.slow
def test_the_gumbel_search_continues_its_tree_within_a_turn_too():
    """The Gumbel root (sequential halving, no noise) with the solver: its first
    micro-move is legal and its tree is continued as the UCT search's is."""
    agent, description = ab.pure_search_agent(40, value="zero", rules="pgx",
                                              reuse_within_turn=True, solver=True,
                                              selection="gumbel")
    assert description.startswith("jaxpuct pure stochastic Gumbel root search")
    _check_turn_reuse(agent, 40, ties_by_value=True)


@pytest.mark.slow
def test_the_search_with_the_solver_continues_its_tree_within_a_turn_too():
    """With the MCTS-solver (no proof this early in a game: the move is the most
    visited, ties broken by value as the policy's own solver move does)."""
    agent, description = ab.pure_search_agent(40, value="zero", rules="pgx",
                                              reuse_within_turn=True, solver=True)
    assert "MCTS-solver" in description
    _check_turn_reuse(agent, 40, ties_by_value=True)
