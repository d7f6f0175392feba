"""``examples/play_2048.py``: its three players on the same games, a few moves each
(in the slow tier; the chance-node search against expectimax, and pgx 2048's split
into move and spawn against pgx's own step, are quick tests in ``test_stochastic.py``).

The invariants of 2048 it must keep: a score is a sum of merged tiles, each at least
4 and a power of two, so a multiple of 4; no game of 2048 ends within 6 moves (16
squares, one new tile a move), so every game is unfinished and every player makes
exactly the moves it is allowed.
"""

import re

import pytest

pytest.importorskip("pgx")

from examples import play_2048  # noqa: E402

_LINE = re.compile(r"^(random|greedy|search S=2)\s+mean score\s+(\S+) .* max\s+(\S+)\s+"
                   r"moves\s+(\d+)\s+unfinished (\d+)")


@pytest.mark.slow  # 7 CPU-s: three compiled game loops, one of them a chance-node search
def test_each_player_keeps_2048s_invariants(capsys):
    play_2048.main(["--games", "3", "--sims", "2", "--max-moves", "6"])
    lines = [_LINE.match(line) for line in capsys.readouterr().out.splitlines()]
    assert [m.group(1) for m in lines if m] == ["random", "greedy", "search S=2"], lines
    for match in lines:
        assert match is not None
        assert int(match.group(4)) == 6 and int(match.group(5)) == 3
        assert float(match.group(3)) % 4 == 0 and float(match.group(2)) >= 0
