"""The exact oracles of the search tests, under the names the tests use.

Everything here lives in :mod:`jaxpuct.testing` (one copy shared with the examples
and benchmarks); this module only gives it the ``ttt_*`` / ``random_game*`` names
of the test modules:

* ``ttt_*``: :mod:`jaxpuct.testing.tictactoe` (rules in NumPy and JAX, exact
  minimax over every reachable position);
* ``random_game*``, ``RandomGame``, ``pad_game``, ``stack_games``:
  :mod:`jaxpuct.testing.random_games` (random finite games, backward induction);
* ``masked_logits``, ``mask_illegal_logits``, ``mask_root_logits``,
  ``MASKED_LOGIT``: :mod:`jaxpuct.testing` (priors for searches that ignore the
  legal mask, e.g. mctx).
"""

from __future__ import annotations

from jaxpuct.testing import random_games, tictactoe
from jaxpuct.testing._common import (  # noqa: F401
    MASKED_LOGIT,
    RecurrentFn,
    mask_illegal_logits,
    mask_root_logits,
    masked_logits,
)

# Tic-tac-toe.
Position = tictactoe.Position
TTTState = tictactoe.State
TTT_NUM_ACTIONS = tictactoe.NUM_ACTIONS
TTT_EMPTY = tictactoe.EMPTY
TTT_LINES = tictactoe.LINES
ttt_parse = tictactoe.parse
ttt_format = tictactoe.format_position
ttt_to_move = tictactoe.to_move
ttt_winner = tictactoe.winner
ttt_is_terminal = tictactoe.is_terminal
ttt_legal_moves = tictactoe.legal_moves
ttt_play = tictactoe.play
ttt_code = tictactoe.code
ttt_minimax_value = tictactoe.minimax_value
ttt_qvalues = tictactoe.qvalues
ttt_optimal_moves = tictactoe.optimal_moves
ttt_all_positions = tictactoe.all_positions
ttt_value_table = tictactoe.value_table
ttt_initial = tictactoe.initial
ttt_batch = tictactoe.batch
ttt_unbatch = tictactoe.unbatch
ttt_legal = tictactoe.legal
ttt_step = tictactoe.step
ttt_codes = tictactoe.codes
ttt_hash = tictactoe.state_hash
ttt_root = tictactoe.root
make_ttt_recurrent_fn = tictactoe.make_recurrent_fn
ttt_recurrent_fn = tictactoe.recurrent_fn

# Random finite games.
RandomGame = random_games.RandomGame
random_game = random_games.random_game
random_game_qvalues = random_games.game_qvalues
random_game_values = random_games.game_values
random_game_optimal_actions = random_games.optimal_actions
pad_game = random_games.pad_game
stack_games = random_games.stack_games
random_game_hash = random_games.node_hash
random_game_root = random_games.root
random_game_step = random_games.step
make_random_game_recurrent_fn = random_games.make_recurrent_fn
random_game_recurrent_fn = random_games.recurrent_fn
