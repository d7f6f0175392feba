"""Match scores with 95% intervals, and the Elo difference they imply.

A match of ``n`` games scores ``s = (wins + draws / 2) / n``. Its interval is the
Wilson score interval (Wilson, "Probable inference, the law of succession, and
statistical inference", JASA 1927) of ``s`` over ``n`` trials: the ``p`` with
``(s - p)**2 = z**2 p (1 - p) / n``. With draws the score's variance is below the
binomial ``p (1 - p) / n``, so the interval is conservative (too wide, never too
narrow). Unlike the normal approximation it stays inside ``[0, 1]`` and is not empty
at ``s = 0`` or ``s = 1``.

The Elo difference of a score is ``400 log10(s / (1 - s))`` (the logistic Elo
model, as in FIDE's and BayesElo's tables: an expected score
``1 / (1 + 10**(-d / 400))`` at a difference ``d``); its interval maps the score's
bounds through the same increasing function, so ``s = 1`` gives ``+inf``.
"""

from __future__ import annotations

import dataclasses
import math

__all__ = ["Z_95", "MatchScore", "elo_difference", "match_score", "wilson_interval"]

Z_95 = 1.959963984540054  # the two-sided 95% quantile of the standard normal
ELO_SCALE = 400.0  # Elo points per factor 10 in the odds of winning


def _check_counts(wins: int, draws: int, losses: int) -> None:
    for name, value in (("wins", wins), ("draws", draws), ("losses", losses)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise ValueError(f"{name} must be an int >= 0, got {value!r}")
    if wins + draws + losses == 0:
        raise ValueError("wins + draws + losses must be >= 1 (no game was played)")


def wilson_interval(score: float, n: int, z: float = Z_95) -> tuple[float, float]:
    """The Wilson score interval of a proportion ``score`` in ``[0, 1]`` over ``n >= 1``
    trials at ``z`` standard deviations (default: 95%)."""
    if not 0.0 <= score <= 1.0:
        raise ValueError(f"score must be in [0, 1], got {score!r}")
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"n must be an int >= 1, got {n!r}")
    z2n = z * z / n
    centre = (score + z2n / 2) / (1 + z2n)
    half = z / (1 + z2n) * math.sqrt(score * (1 - score) / n + z2n / (4 * n))
    return max(0.0, centre - half), min(1.0, centre + half)


def elo_difference(score: float) -> float:
    """``400 log10(s / (1 - s))``: ``-inf`` at 0, ``+inf`` at 1."""
    if not 0.0 <= score <= 1.0:
        raise ValueError(f"score must be in [0, 1], got {score!r}")
    if score == 0.0:
        return -math.inf
    if score == 1.0:
        return math.inf
    return ELO_SCALE * math.log10(score / (1.0 - score))


@dataclasses.dataclass(frozen=True)
class MatchScore:
    """A match's result from one player's view, with 95% intervals.

    Attributes:
      wins, draws, losses: game counts.
      score: ``(wins + draws / 2) / games``.
      score_low, score_high: Wilson 95% interval of the score.
      elo, elo_low, elo_high: the Elo difference and its interval (may be infinite).
    """

    wins: int
    draws: int
    losses: int
    score: float
    score_low: float
    score_high: float
    elo: float
    elo_low: float
    elo_high: float

    @property
    def games(self) -> int:
        return self.wins + self.draws + self.losses

    def summary(self) -> str:
        """``W/D/L 40/3/21  score 0.648 [0.526, 0.754]  Elo +106 [+18, +195]``."""
        def elo(x: float) -> str:
            return f"{x:+.0f}" if math.isfinite(x) else ("+inf" if x > 0 else "-inf")
        return (f"W/D/L {self.wins}/{self.draws}/{self.losses}  score {self.score:.3f} "
                f"[{self.score_low:.3f}, {self.score_high:.3f}]  Elo {elo(self.elo)} "
                f"[{elo(self.elo_low)}, {elo(self.elo_high)}]")


def match_score(wins: int, draws: int, losses: int, z: float = Z_95) -> MatchScore:
    """The :class:`MatchScore` of ``wins``, ``draws`` and ``losses`` (ints >= 0, at
    least one game)."""
    _check_counts(wins, draws, losses)
    n = wins + draws + losses
    score = (wins + 0.5 * draws) / n
    low, high = wilson_interval(score, n, z)
    return MatchScore(wins=wins, draws=draws, losses=losses, score=score, score_low=low,
                      score_high=high, elo=elo_difference(score), elo_low=elo_difference(low),
                      elo_high=elo_difference(high))
