"""pgx backgammon split into a decision half and an exact chance half."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

pgx = pytest.importorskip("pgx")

from jaxpuct.envs import pgx_backgammon as bg  # noqa: E402

_ENV = pgx.make("backgammon")
_PGX_STEP = jax.jit(jax.vmap(_ENV.step))
_DECISION = jax.jit(bg.decision)
_CHANCE = jax.jit(bg.chance)
_DICE_FIELDS = ("_dice", "_playable_dice")


def test_dice_distribution():
    probs = np.asarray(bg.DICE_PROBS)
    assert len(bg.DICE) == bg.NUM_OUTCOMES == 21 and probs.sum() == pytest.approx(1.0)
    counts = np.zeros(21)
    for a in range(1, 7):
        for b in range(1, 7):
            counts[bg.outcome_of_dice(a, b)] += 1
    np.testing.assert_allclose(probs, counts / 36)
    p = np.asarray(bg.dice_probs(jnp.asarray([True, False])))
    np.testing.assert_allclose(p.sum(-1), 1.0, rtol=1e-6)
    assert p[1, 0] == 1.0


# outcome index of pgx's dice (0-5 each, either order)
_OUTCOME = np.array([[bg.outcome_of_dice(a + 1, b + 1) for b in range(6)] for a in range(6)])


def _differences(ours, theirs):
    """``{field: [B] bool}``: where the states differ (the two dice in either order)."""
    out = {}
    for name in theirs.__dataclass_fields__:
        a, b = getattr(ours, name), getattr(theirs, name)
        if name in ("_dice", "_playable_dice"):  # pgx keeps its random order
            a, b = jnp.sort(a, axis=-1), jnp.sort(b, axis=-1)
        out[name] = jnp.any((a != b).reshape(a.shape[0], -1), axis=-1)
    return out


@jax.jit
def _play_both(key):
    """Random games (uniform legal micro-moves) played by pgx's ``step`` and by the
    split with pgx's roll; per ply, where the states differ, and counts."""
    b, plies = 8, 640
    state = jax.vmap(_ENV.init)(jax.random.split(key, b))

    def ply(carry, key):
        theirs, ours = carry
        act_key, step_key = jax.random.split(key)
        logits = jnp.where(theirs.legal_action_mask, 0.0, -jnp.inf)
        action = jax.random.categorical(act_key, logits).astype(jnp.int32)
        done = theirs.terminated
        theirs = jax.vmap(_ENV.step)(theirs, action, jax.random.split(step_key, b))
        after = bg.decision(ours, action)
        dice = jnp.maximum(theirs._dice, 0)
        outcome = jnp.where(after.roll, jnp.asarray(_OUTCOME)[dice[:, 0], dice[:, 1]], 0)
        new = bg.chance(after, outcome)
        diff = jax.tree.map(lambda d: d & ~done, _differences(new, theirs))
        # Rows that had ended keep pgx's state (its step returns them unchanged).
        ours = jax.tree.map(lambda o, t: jnp.where(
            done.reshape((-1,) + (1,) * (o.ndim - 1)), t, o), new, theirs)
        counts = (jnp.sum(after.roll & ~done), jnp.sum(new.terminated & ~done))
        return (theirs, ours), (diff, counts)

    (theirs, _), (diff, counts) = jax.lax.scan(ply, (state, state),
                                                jax.random.split(key, plies))
    return diff, counts, theirs.terminated


def test_split_gives_pgx_states_for_the_same_dice():
    """Random games to the end: the decision half, then the chance half with pgx's
    roll, give pgx's next state (board, dice, legal mask, player, rewards,
    observation, ...) field by field at every ply."""
    diff, (turns, ends), terminated = _play_both(jax.random.PRNGKey(0))
    for name, where in diff.items():
        assert not np.asarray(where).any(), (name, np.argwhere(np.asarray(where))[:3])
    assert np.asarray(terminated).all() and int(ends.sum()) == 8
    assert int(turns.sum()) > 50 * 8
