"""Sampled search (:mod:`jaxpuct.sampled`) against oracles.

* Gumbel-top-``K``: inclusion frequencies over many draws against the exact
  inclusion probabilities of sampling without replacement (enumerated), the
  estimator ``1[a in S] / q(a)`` unbiased, and ``log q`` recomputed in NumPy;
* the prior over the slots, ``(π / q)`` normalised, recomputed in NumPy from each
  stored node's key and state;
* ``K = A`` is full-width search: the same visit counts and values, bit for bit
  (slot ``k`` is the ``k``-th legal action in id order; a node with fewer legal
  actions has its illegal slots last);
* batch independence (a permuted batch with permuted keys is the permuted
  result), ``check_tree`` on plain, reused (continued with two leaves per step,
  early stopping, root noise and a banned root action) and continuous trees;
* a two-level game with 1,000 root actions (:mod:`jaxpuct.testing.two_level`):
  the optimum is returned exactly when it is sampled, at the exact rate;
* factored joint actions (stochastic beam search) against enumeration, and the
  Gumbel root over them against NumPy (the considered samples, the
  completed-Q weights, the move);
* a continuous 2-D planning problem whose best first action is known: the
  distance of the move to it shrinks as ``S`` and ``K`` grow;
* bad input raises a ``ValueError`` naming the argument.

One small game, ``B = 4``, under ``jit`` with shared compilations.
"""

from __future__ import annotations

import functools
import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import search_cases as sc

import jaxpuct
from jaxpuct import sampled
from jaxpuct.sampled import DiscreteActions, GaussianActions, sampled_policy
from jaxpuct.testing import check_tree, two_level
from jaxpuct.testing.synthetic import mix32

B, A, K, S = 4, 6, 4, 16


# ------------------------------------------------------------- a discrete game


def _evaluate(ids):
    """``(logits [M, A], legal [M, A], value [M])`` of states ``ids [M]`` uint32:
    about a quarter of the actions illegal (some nodes have fewer than K legal)."""
    u = (ids & jnp.uint32(0xFFFF)).astype(jnp.float32) / 65536.0
    a = jnp.arange(A, dtype=jnp.float32)
    logits = 2.0 * jnp.sin(6.0 * u[:, None] + 1.3 * a + 0.5 * a * u[:, None])
    bits = mix32(ids[:, None] + jnp.uint32(7919) * jnp.arange(1, A + 1, dtype=jnp.uint32))
    legal = (bits % jnp.uint32(4)) != 0
    return logits, legal, 0.5 * jnp.cos(9.0 * u)


def _root(ids):
    logits, legal, value = _evaluate(ids)
    return jaxpuct.RootFnOutput(prior_logits=logits, value=value, embedding=ids,
                                legal_action_mask=legal)


def _recurrent_fn(params, key, action, ids):
    del params, key
    new = mix32(ids * jnp.uint32(0x9E3779B1) + action.astype(jnp.uint32) + jnp.uint32(1))
    logits, legal, value = _evaluate(new)
    reward = 0.1 * jnp.sin(new.astype(jnp.float32))
    out = jaxpuct.RecurrentFnOutput(reward=reward, discount=-jnp.ones_like(value),
                                    prior_logits=logits, value=value,
                                    legal_action_mask=legal)
    return out, new


_IDS = mix32(jnp.arange(B, dtype=jnp.uint32) + jnp.uint32(99))
_KEYS = jax.random.split(jax.random.PRNGKey(3), B)


_NONE_INVALID = jnp.zeros((B, A), jnp.bool_)
# Root actions never to draw, in the prior test: each tree's first legal action.
_INVALID = jax.nn.one_hot(jnp.argmax(_evaluate(_IDS)[1], -1), A, dtype=jnp.bool_)


@functools.partial(sc.jit, static_argnames=("num_samples",))
def _sampled(keys, ids, invalid=_NONE_INVALID, *, num_samples=K):
    return sampled_policy(None, keys, _root(ids), _recurrent_fn, S, invalid,
                          num_samples=num_samples, temperature=0.0, dirichlet_fraction=0.0)


@sc.jit
def _full(keys, ids):
    return jaxpuct.alphazero_policy(None, keys, _root(ids), _recurrent_fn, S,
                                    temperature=0.0, dirichlet_fraction=0.0)


@sc.jit
def _reuse(keys, tree, slot):
    sub, reused = jaxpuct.subtree(tree, slot)
    # The continued search bans, through invalid_actions, the action held by the
    # new root's first legal slot that has no visit yet (each tree here has one).
    root_edges = sub.children_index[:, 0]
    open_slot = jnp.argmax((root_edges != jaxpuct.ILLEGAL) & (sub.edge_visits[:, 0] == 0), -1)
    banned = jnp.take_along_axis(sub.embeddings.actions[:, 0], open_slot[:, None], -1)[:, 0]
    # Continued with two leaves per step, root noise over the slots and early
    # stopping: one compilation for the five features.
    out = sampled_policy(None, keys, None, _recurrent_fn, S, jax.nn.one_hot(banned, A) > 0,
                         tree=sub, temperature=1.0, leaves_per_step=2, early_stop=True)
    return sub, reused, out, open_slot, banned


# ------------------------------------------------------------ Gumbel-top-K


def _inclusion_probabilities(p: np.ndarray, k: int) -> np.ndarray:
    """Exact ``P(a in S)`` of ``k`` draws without replacement from ``p``
    (successive sampling, every ordered sequence enumerated)."""
    out = np.zeros_like(p)
    for seq in itertools.permutations(range(len(p)), k):
        prob, left = 1.0, 1.0
        for a in seq:
            prob *= p[a] / left
            left -= p[a]
        out[list(seq)] += prob
    return out


@sc.jit
def _draws(keys, logits):
    space = DiscreteActions(4)
    legal = jnp.ones((keys.shape[0], 4), jnp.bool_)
    log_prior = jnp.broadcast_to(jax.nn.log_softmax(logits), (keys.shape[0], 4))
    gumbel = jax.vmap(lambda k: jax.random.gumbel(k, (4,)))(keys)
    actions, valid, log_q = sampled.gumbel_top_k(log_prior, gumbel, 2)
    samples = space.sample(keys, jnp.broadcast_to(logits, (keys.shape[0], 4)), legal, 2,
                           "inclusion")
    return actions, valid, log_q, gumbel, samples


def test_gumbel_top_k_inclusion_frequencies_and_unbiased_weights():
    """20000 draws of K = 2 from p = (0.5, 0.25, 0.15, 0.1): each action's inclusion
    frequency is within 5 standard errors of the exact probability, and the mean
    of 1[a in S] / q(a) within 5 standard errors of 1 (priority sampling)."""
    p = np.array([0.5, 0.25, 0.15, 0.1])
    n = 20000
    keys = jax.random.split(jax.random.PRNGKey(0), n)
    actions, valid, log_q, gumbel, samples = jax.device_get(_draws(keys, jnp.log(p)))
    assert valid.all() and np.all(actions[:, 0] < actions[:, 1])  # distinct, sorted
    np.testing.assert_array_equal(samples.actions, actions)  # the space draws the same
    exact = _inclusion_probabilities(p, 2)
    np.testing.assert_allclose(exact.sum(), 2.0)
    included = np.zeros((n, 4))
    included[np.arange(n)[:, None], actions] = 1.0
    freq = included.mean(0)
    se = np.sqrt(exact * (1 - exact) / n)
    assert np.all(np.abs(freq - exact) < 5 * se), (freq, exact)
    weights = np.zeros((n, 4))
    weights[np.arange(n)[:, None], actions] = np.exp(-log_q)
    mean, err = weights.mean(0), weights.std(0) / np.sqrt(n)
    assert np.all(np.abs(mean - 1.0) < 5 * err), (mean, err)
    # log q recomputed from the same Gumbel draws.
    perturbed = np.log(p) + gumbel
    kappa = np.sort(perturbed, axis=1)[:, -3]
    top = np.sort(np.argsort(-perturbed, axis=1)[:, :2], axis=1)
    np.testing.assert_array_equal(top, actions)
    q = 1.0 - np.exp(-np.exp(np.log(p)[actions] - kappa[:, None]))
    np.testing.assert_allclose(log_q, np.log(q), rtol=1e-4, atol=1e-5)


def _numpy_prior(logits, legal, gumbel, k):
    """The slots and prior of one node in NumPy: the K largest log π + g over the
    legal actions, sorted by id; P ∝ π / q with q = 1 - exp(-exp(log π - κ))."""
    logp = np.where(legal, logits - logits[legal].max(), -np.inf)
    logp = logp - np.log(np.exp(logp).sum())
    perturbed = np.where(legal, logp + gumbel, -np.inf)
    order = np.argsort(-perturbed, kind="stable")
    chosen = np.sort([a for a in order[:k] if legal[a]])
    kappa = perturbed[order[k]] if k < len(logits) else -np.inf
    q = 1.0 - np.exp(-np.exp(logp[chosen] - kappa)) if np.isfinite(kappa) else np.ones(
        len(chosen))
    w = np.exp(logp[chosen]) / q
    prior = np.zeros(k)
    prior[:len(chosen)] = w / w.sum()
    return chosen, prior


def test_prior_is_pi_over_inclusion_probability_at_every_node():
    """Every stored node's slots and prior, recomputed in NumPy from its key (the
    Gumbel draw) and its state (the network's logits and mask; at the root minus
    ``invalid_actions``, which are never drawn)."""
    out = _sampled(_KEYS, _IDS, _INVALID)
    tree = jax.device_get(out.search_tree)
    emb = tree.embeddings
    logits, legal, _ = jax.device_get(_evaluate(jnp.asarray(emb.state.reshape(-1))))
    gumbels = jax.device_get(jax.vmap(lambda k: jax.random.gumbel(k, (A,)))(
        jnp.asarray(emb.key.reshape(-1, emb.key.shape[-1]))))
    checked = few = 0
    for b in range(B):
        for n in range(int(tree.num_nodes[b])):
            i = b * tree.max_nodes + n
            mask = legal[i] & ~np.asarray(_INVALID[b]) if n == 0 else legal[i]
            chosen, prior = _numpy_prior(logits[i], mask, gumbels[i], K)
            few += len(chosen) < K
            np.testing.assert_array_equal(emb.actions[b, n, :len(chosen)], chosen)
            assert np.all(tree.children_index[b, n, len(chosen):] == jaxpuct.ILLEGAL)
            np.testing.assert_allclose(tree.children_prior[b, n], prior, rtol=1e-5,
                                       atol=1e-7)
            checked += 1
    assert checked > B and few > 0  # rows with fewer than K legal actions were seen


def test_num_samples_equal_to_num_actions_is_full_width_search():
    """K = A: the same tree as alphazero_policy, node for node, mapped through the
    slots (values and visit counts bit for bit, priors to float32 rounding)."""
    got = jax.device_get(_sampled(_KEYS, _IDS, num_samples=A))
    ref = jax.device_get(_full(_KEYS, _IDS))
    t, r = got.search_tree, ref.search_tree
    np.testing.assert_array_equal(t.num_nodes, r.num_nodes)
    np.testing.assert_array_equal(t.node_visits, r.node_visits)
    np.testing.assert_array_equal(t.node_values, r.node_values)
    np.testing.assert_array_equal(t.embeddings.state, r.embeddings)
    acts = t.embeddings.actions
    rows = np.arange(B)[:, None, None], np.arange(t.max_nodes)[None, :, None]
    legal = t.children_index != jaxpuct.ILLEGAL
    for name in ("edge_visits", "children_index"):
        mapped = getattr(r, name)[rows[0], rows[1], acts]
        np.testing.assert_array_equal(np.where(legal, getattr(t, name), 0),
                                      np.where(legal, mapped, 0), err_msg=name)
    np.testing.assert_allclose(t.children_prior, np.where(legal, r.children_prior[
        rows[0], rows[1], acts], 0.0), rtol=1e-6)
    np.testing.assert_array_equal(got.action, ref.action)


# --------------------------------------------------- structure and independence


def test_trees_pass_check_tree_and_moves_are_sampled_legal_actions():
    device_out = _sampled(_KEYS, _IDS)
    out = jax.device_get(device_out)
    tree = out.search_tree
    assert tree.kind == "sampled" and tree.num_actions == K
    assert tree.sampled == jaxpuct.tree.SampledLayout(K, DiscreteActions(A))
    check_tree(tree, S)
    _, legal, _ = jax.device_get(_evaluate(_IDS))
    for b in range(B):
        assert out.sampled_actions[b, out.action_slot[b]] == out.action[b]
        assert legal[b, out.action[b]]
        np.testing.assert_allclose(out.action_weights[b].sum(), 1.0, rtol=1e-6)
    # Tree reuse through the slots: the subtree keeps its samples and is continued
    # (with two leaves per step).
    sub, reused, cont, open_slot, banned = jax.device_get(_reuse(
        _KEYS, device_out.search_tree, device_out.action_slot))
    assert np.all(reused)
    # The banned action's slot is ILLEGAL at the continued root, never visited or played.
    assert np.all(sub.edge_visits[np.arange(B), 0, open_slot] == 0)
    assert np.all(cont.search_tree.children_index[np.arange(B), 0, open_slot]
                  == jaxpuct.ILLEGAL)
    assert np.all(cont.search_tree.edge_visits[np.arange(B), 0, open_slot] == 0)
    assert np.all(cont.action != banned)
    check_tree(cont.search_tree, None)
    np.testing.assert_array_equal(cont.search_tree.embeddings.actions[:, 0],
                                  np.asarray(sub.embeddings.actions[:, 0]))
    # Every walk found an edge: the new root visits are the walks early stopping
    # did not skip.
    saved = cont.search_tree.summary().simulations_saved
    assert np.all((saved >= 0) & (saved < S))
    np.testing.assert_array_equal(cont.search_tree.node_visits[:, 0],
                                  sub.node_visits[:, 0] + S - saved)
    legal = cont.search_tree.children_index[:, 0] != jaxpuct.ILLEGAL
    assert np.all(legal[np.arange(B), cont.action_slot])


def test_batch_elements_are_independent():
    """The batch permuted, with its keys permuted, gives the permuted result (the
    samples of a node depend on its tree's key and its path only)."""
    perm = np.array([2, 0, 3, 1])
    out = jax.device_get(_sampled(_KEYS, _IDS))
    moved = jax.device_get(_sampled(_KEYS[perm], _IDS[perm]))
    for name in ("edge_visits", "node_values", "children_prior"):
        np.testing.assert_array_equal(getattr(moved.search_tree, name),
                                      getattr(out.search_tree, name)[perm], err_msg=name)
    np.testing.assert_array_equal(moved.search_tree.embeddings.actions,
                                  out.search_tree.embeddings.actions[perm])
    np.testing.assert_array_equal(moved.action, out.action[perm])


# ------------------------------------------------------------ continuous actions

_TARGET = jnp.array([0.8, -0.6])
CB = 32  # trees per continuous search


def _continuous_fn(params, key, action, x):
    """x' = x + a, reward -|x' - c|^2, discount 0.5, value 0; N(0, 1) policy."""
    del params, key
    new = x + action
    reward = -jnp.sum((new - _TARGET) ** 2, axis=-1)
    zeros = jnp.zeros((x.shape[0],))
    out = jaxpuct.RecurrentFnOutput(reward=reward, discount=zeros + 0.5,
                                    prior_logits=jnp.zeros((x.shape[0], 4)), value=zeros)
    return out, new


@functools.partial(sc.jit, static_argnames=("num_samples", "sims", "final_move"))
def _continuous(key, *, num_samples, sims, final_move):
    root = jaxpuct.RootFnOutput(prior_logits=jnp.zeros((CB, 4)), value=jnp.zeros((CB,)),
                                embedding=jnp.zeros((CB, 2)))
    # Returns reach about -10: min-max normalised Q (with FPU) instead of [-1, 1].
    return sampled_policy(None, key, root, _continuous_fn, sims, num_samples=num_samples,
                          action_space=GaussianActions(2), temperature=0.0,
                          dirichlet_fraction=0.0, max_depth=4, final_move=final_move,
                          selection=jaxpuct.PUCTConfig(q_normalization="minmax"))


def test_continuous_move_approaches_the_optimum_as_samples_and_simulations_grow():
    """The best first action is the target c, |c| = 1 (reach it, then stay). Over
    32 trees the mean distance of the move to c is below the prior mean's (1.0)
    at (K, S) = (4, 16) (measured 0.77 to 0.89 over seeds) and below 0.6 of
    that at (32, 128) (measured 0.38 to 0.40), and never below the best root
    sample's (the search picks among the samples). The small search plays the
    LCB move (KataGo's), the large one the most visited."""
    distances = []
    for k, move in ((4, "lcb"), (32, "visits")):
        out = jax.device_get(_continuous(jax.random.PRNGKey(5), num_samples=k, sims=4 * k,
                                         final_move=move))
        assert (out.search_tree.node_sq_values is not None) == (move == "lcb")
        tree = out.search_tree
        assert tree.embeddings.actions.shape == (CB, 4 * k + 1, k, 2)
        assert np.any(tree.children_index[:, 1:] >= 0)  # deeper than one ply
        check_tree(tree, 4 * k)
        slot = out.action_slot
        np.testing.assert_array_equal(out.action, out.sampled_actions[np.arange(CB), slot])
        dist = np.linalg.norm(out.action - np.asarray(_TARGET), axis=-1)
        best = np.linalg.norm(out.sampled_actions - np.asarray(_TARGET), axis=-1).min(-1)
        assert np.all(dist >= best - 1e-6)
        distances.append(dist.mean())
    assert distances[0] < 1.0 and distances[1] < 0.6 * distances[0], distances


def test_gaussian_log_prob_is_the_normal_density():
    space = GaussianActions(2)
    params = jnp.array([[0.5, -1.0, np.log(2.0), 0.0]])
    actions = jnp.array([[[0.5, -1.0], [1.5, 0.0]]])
    got = np.asarray(space.log_prob(params, actions))[0]
    sd = np.array([2.0, 1.0])
    z = (np.array([[0.5, -1.0], [1.5, 0.0]]) - [0.5, -1.0]) / sd
    want = np.sum(-0.5 * z**2 - np.log(sd) - 0.5 * np.log(2 * np.pi), axis=-1)
    np.testing.assert_allclose(got, want, rtol=1e-6)


# ------------------------------------------------------------------ bad input


_FACTORED_ROOT = jaxpuct.RootFnOutput(prior_logits=jnp.zeros((B, 5)), value=jnp.zeros(B),
                                     embedding=_IDS, legal_action_mask=jnp.ones((B, 5), bool))


def _call(**kw):
    args = dict(num_samples=K)
    args.update(kw)
    root = args.pop("root", _root(_IDS))
    # Traced, never run: every refusal is at trace time, and an eager call would
    # compile each operation before the one that refuses.
    return jax.jit(lambda key: sampled_policy(None, key, root, _recurrent_fn, S, **args))(
        jax.random.PRNGKey(0))


@pytest.mark.parametrize("kw, words", [
    (dict(num_samples=A + 1), ["num_samples", "A=6"]),
    (dict(num_samples=0), ["num_samples", ">= 1"]),
    (dict(num_samples=2.0), ["num_samples", "int"]),
    (dict(graph=jaxpuct.GraphConfig()), ["graph", "transposition"]),
    (dict(solver=True), ["solver", "every"]),
    (dict(prior_correction="beta"), ["prior_correction"]),
    (dict(action_space="gauss"), ["action_space"]),
    (dict(action_space=GaussianActions(2)), ["root.prior_logits", "[B=4, 4]"]),
    (dict(action_space=GaussianActions(3), root=jaxpuct.RootFnOutput(
        prior_logits=jnp.zeros((B, 6)), value=jnp.zeros(B), embedding=jnp.zeros(B)),
        invalid_actions=jnp.zeros((B, 6), bool)), ["invalid_actions", "discrete"]),
    (dict(invalid_actions=jnp.zeros((B, A + 1), bool)), ["invalid_actions", "[4, 6]"]),
    (dict(final_move="gumbel"), ["final_move"]),
    # Factored actions: more samples than joint actions, and masks over the joint
    # actions (not a product of factor masks) at the root and from recurrent_fn
    # (whose mask here is [B, 6], one column per joint action).
    (dict(action_space=sampled.FactoredActions((2, 3)), num_samples=7,
          root=_FACTORED_ROOT), ["num_samples", "A=6"]),
    (dict(action_space=sampled.FactoredActions((2, 3)), root=_FACTORED_ROOT.replace(
        legal_action_mask=jnp.ones((B, 6), bool))),
     ["root.legal_action_mask", "joint action", "[B, 5]", "DiscreteActions(6)"]),
    (dict(action_space=sampled.FactoredActions((2, 3)), root=_FACTORED_ROOT),
     ["recurrent_fn output .legal_action_mask", "joint action", "[B, 5]"]),
])
def test_bad_input_is_refused_by_name(kw, words):
    with pytest.raises(ValueError) as info:
        _call(**kw)
    for word in words:
        assert word in str(info.value), (word, str(info.value))


def test_trees_of_another_kind_are_refused():
    plain = _full(_KEYS, _IDS).search_tree  # compiled by the K = A test
    with pytest.raises(ValueError, match="sampled_policy only"):
        sampled_policy(None, jax.random.PRNGKey(0), None, _recurrent_fn, S, tree=plain)
    tree = _sampled(_KEYS, _IDS).search_tree
    with pytest.raises(ValueError, match="sampled-action layout"):
        jaxpuct.alphazero_policy(None, jax.random.PRNGKey(0), None, _recurrent_fn, S,
                                 tree=tree)
    with pytest.raises(ValueError, match="num_samples"):
        sampled_policy(None, jax.random.PRNGKey(0), None, _recurrent_fn, S, tree=tree,
                       num_samples=3)
    with pytest.raises(ValueError, match="action_slot"):
        jaxpuct.subtree_or_init(tree, jnp.zeros(B, jnp.int32), _root(_IDS))


# ----------------------------------------------------------------- Gumbel root


@sc.jit
def _gumbel_pair(keys, ids):
    """The sampled Gumbel root with K = A, and gumbel_policy given the same draw
    (the root's Gumbel draw is jax.random.gumbel of the root's stored key)."""
    got = sampled.sampled_gumbel_policy(None, keys, _root(ids), _recurrent_fn, S,
                                        num_samples=A, max_num_considered_actions=4)
    draw = jax.vmap(lambda k: jax.random.gumbel(k, (A,)))(got.search_tree.embeddings.key[:, 0])
    ref = jaxpuct.gumbel_policy(None, keys, _root(ids), _recurrent_fn, S, gumbel=draw,
                                max_num_considered_actions=4)
    return got, ref


def test_sampled_gumbel_root_with_all_actions_is_gumbel_search():
    """K = A: the sampled Gumbel root is gumbel_policy with the same draw: the same
    visits (mapped through the slots), move, and improved policy (to rounding: the
    root's π is renormalised over the samples)."""
    got, ref = jax.device_get(_gumbel_pair(_KEYS, _IDS))
    t, r = got.search_tree, ref.search_tree
    check_tree(t, S)
    np.testing.assert_array_equal(t.node_visits, r.node_visits)
    np.testing.assert_allclose(t.node_values, r.node_values, rtol=1e-5, atol=1e-6)
    acts = t.embeddings.actions
    legal = t.children_index != jaxpuct.ILLEGAL
    rows = np.arange(B)[:, None, None], np.arange(t.max_nodes)[None, :, None]
    np.testing.assert_array_equal(np.where(legal, t.edge_visits, 0),
                                  np.where(legal, r.edge_visits[rows[0], rows[1], acts], 0))
    np.testing.assert_array_equal(got.action, ref.action)
    np.testing.assert_allclose(got.action_weights, np.where(
        legal[:, 0], ref.action_weights[np.arange(B)[:, None], acts[:, 0]], 0.0),
        rtol=1e-5, atol=1e-6)


def test_sampled_gumbel_root_refusals():
    for kw, word in ((dict(action_space=GaussianActions(3)), "discrete"),
                     (dict(leaves_per_step=2), "leaves_per_step"),
                     (dict(early_stop=True), "early_stop"),
                     (dict(tree=_sampled(_KEYS, _IDS).search_tree), "tree=")):
        with pytest.raises(ValueError, match=word):
            sampled.sampled_gumbel_policy(None, jax.random.PRNGKey(0), _root(_IDS),
                                          _recurrent_fn, S, num_samples=K, **kw)


# ------------------------------------------------------ factored joint actions

_FACTORS = (2, 3)  # A = 6 joint actions, as the game above


@sc.jit
def _factored_draws(keys, logits):
    space = sampled.FactoredActions(_FACTORS)
    rows = keys.shape[0]
    return space.sample(keys, jnp.broadcast_to(logits, (rows, 5)), jnp.ones((rows, 5), bool),
                        2, "inclusion")


def test_factored_draws_are_gumbel_top_k_of_the_joint():
    """Stochastic beam search over two factors, 20000 draws of K = 2: each joint
    action's inclusion frequency is within 5 standard errors of the exact
    probability of 2 draws without replacement from the product policy
    (enumerated), the prior weight 1 / q(a) from its threshold κ is unbiased
    (which needs κ on the scale of log π + g), the sample of larger ``g + log π``
    (the stored Gumbel a Gumbel root reads) is distributed as π, and the ids
    decode to the factors."""
    f0, f1 = np.array([0.7, 0.3]), np.array([0.5, 0.3, 0.2])
    joint = np.outer(f0, f1).reshape(-1)  # id = a0 * 3 + a1
    n = 20000
    keys = jax.random.split(jax.random.PRNGKey(1), n)
    samples = jax.device_get(_factored_draws(keys, jnp.log(jnp.concatenate(
        [jnp.asarray(f0), jnp.asarray(f1)]))))
    actions = samples.actions
    assert samples.valid.all() and np.all(actions[:, 0] < actions[:, 1])
    exact = _inclusion_probabilities(joint, 2)
    included = np.zeros((n, 6))
    included[np.arange(n)[:, None], actions] = 1.0
    se = np.sqrt(exact * (1 - exact) / n)
    assert np.all(np.abs(included.mean(0) - exact) < 5 * se), (included.mean(0), exact)
    np.testing.assert_allclose(samples.log_prior, np.log(joint[actions]), rtol=1e-5)
    # The slot logits are log π - log q: recover 1 / q and check E[1[a in S] / q] = 1.
    inv_q = np.exp(samples.logits - samples.log_prior)
    weights = np.zeros((n, 6))
    weights[np.arange(n)[:, None], actions] = inv_q
    mean, err = weights.mean(0), weights.std(0) / np.sqrt(n)
    assert np.all(np.abs(mean - 1.0) < 5 * err), (mean, err)
    # The Gumbel values a Gumbel root ranks the samples by (perturbed - log π):
    # the sample with the largest g + log π is a draw from π (Gumbel-max), and
    # the ranked pair keeps that order.
    score = samples.gumbel + samples.log_prior
    first = actions[np.arange(n), np.argmax(score, axis=1)]
    freq = np.bincount(first, minlength=6) / n
    se = np.sqrt(joint * (1 - joint) / n)
    assert np.all(np.abs(freq - joint) < 5 * se), (freq, joint)
    space = sampled.FactoredActions(_FACTORS)
    values = np.asarray(space.decode(jnp.asarray(actions)))
    np.testing.assert_array_equal(values, np.stack([actions // 3, actions % 3], -1))
    np.testing.assert_array_equal(np.asarray(space.encode(jnp.asarray(values))), actions)


def _factored_fn(params, key, action, ids):
    """The game above, with a factored policy head: two factors of the joint
    id's logits, masked per factor value."""
    out, new = _recurrent_fn(params, key, action, ids)
    logits, legal = out.prior_logits[:, :5], out.legal_action_mask[:, :5]
    legal = legal.at[:, 0].set(True).at[:, 2].set(True)  # every node has a joint action
    return out.replace(prior_logits=logits, legal_action_mask=legal), new


def _factored_root(ids):
    root = _root(ids)
    return root.replace(prior_logits=root.prior_logits[:, :5],
                        legal_action_mask=root.legal_action_mask[:, :5].at[:, 0].set(True)
                        .at[:, 2].set(True))


_GUMBEL_M = 2  # considered root samples: fewer than K, so halving has to choose


@sc.jit
def _factored_search(keys, ids):
    """PUCT and the Gumbel root over factored samples (one compilation for both
    tests), and the Gumbel root's draw recomputed from its stored key."""
    root = _factored_root(ids)
    space = sampled.FactoredActions(_FACTORS)
    puct = sampled_policy(None, keys, root, _factored_fn, S, num_samples=K,
                          action_space=space, temperature=0.0, dirichlet_fraction=0.0)
    gumbel = sampled.sampled_gumbel_policy(None, keys, root, _factored_fn, S, num_samples=K,
                                           max_num_considered_actions=_GUMBEL_M,
                                           action_space=space)
    draw = space.sample(gumbel.search_tree.embeddings.key[:, 0], root.prior_logits,
                        root.legal_action_mask, K, "inclusion")
    return puct, gumbel, draw


def test_factored_search_stores_joint_ids_of_legal_factor_values():
    out = jax.device_get(_factored_search(_KEYS, _IDS)[0])
    tree = out.search_tree
    check_tree(tree, S)
    assert tree.sampled.space == sampled.FactoredActions(_FACTORS)
    legal = tree.children_index != jaxpuct.ILLEGAL
    acts = tree.embeddings.actions
    assert np.all((acts[legal] >= 0) & (acts[legal] < 6))
    # Distinct per node, and the move is a root sample.
    for b in range(B):
        for n in range(int(tree.num_nodes[b])):
            row = acts[b, n][legal[b, n]]
            assert len(set(row.tolist())) == len(row)
        assert out.sampled_actions[b, out.action_slot[b]] == out.action[b]


def test_factored_gumbel_root_considers_the_gumbel_top_m_and_returns_completed_q_weights():
    """sampled_gumbel_policy over FactoredActions (2 x 3 joint actions, K = 4,
    m = 2, S = 16), against NumPy: the visited root samples are exactly the m
    largest g + log π of the draw; the root prior is π renormalised over the
    samples; action_weights is softmax(log π + σ(q̂)) with σ the completed Q
    (mixed value for the unvisited, min-max rescaled, times 0.1 (50 + max N))
    recomputed from the tree's visits, rewards, discounts and values; the move
    is the best g + log π + σ(q̂) among the most visited."""
    _, out, draw = jax.device_get(_factored_search(_KEYS, _IDS))
    tree = out.search_tree
    check_tree(tree, S)
    assert tree.sampled.space == sampled.FactoredActions(_FACTORS)
    np.testing.assert_array_equal(out.sampled_actions, draw.actions)
    for b in range(B):
        valid = draw.valid[b]
        considered = min(_GUMBEL_M, int(valid.sum()))
        pi = np.where(valid, np.exp(draw.log_prior[b]), 0.0)
        pi = pi / pi.sum()
        np.testing.assert_allclose(tree.root_prior[b], pi, rtol=1e-5, atol=1e-7)
        logits = np.log(np.maximum(pi, 1e-30))
        visits = tree.edge_visits[b, 0].astype(np.float64)
        ranked = np.argsort(-np.where(valid, draw.gumbel[b] + logits, -np.inf))
        assert set(np.flatnonzero(visits > 0)) == set(ranked[:considered]), (visits, ranked)
        assert visits.sum() == S
        # Completed Q at the root (Danihelka et al. 2022, appendix D).
        child = tree.children_index[b, 0]
        has_q = (child >= 0) & (visits > 0)
        safe = np.maximum(child, 0)
        q = tree.node_rewards[b, safe] + tree.node_discounts[b, safe] * tree.node_values[
            b, safe]
        mixed = (tree.raw_values[b, 0] + visits[has_q].sum() * np.sum(pi[has_q] * q[has_q])
                 / pi[has_q].sum()) / (visits[has_q].sum() + 1.0)
        completed = np.where(has_q, q, mixed)
        completed = (completed - completed.min()) / max(completed.max() - completed.min(),
                                                        1e-8)
        sigma = 0.1 * (50.0 + visits.max()) * completed
        z = np.where(valid, np.exp(logits + sigma - np.max(logits + sigma)), 0.0)
        np.testing.assert_allclose(out.action_weights[b], z / z.sum(), rtol=1e-4,
                                   atol=1e-6)
        score = np.where(valid & (visits == visits.max()),
                         draw.gumbel[b] + logits - logits.max() + sigma, -np.inf)
        assert out.action_slot[b] == np.argmax(score)
        assert out.action[b] == draw.actions[b, out.action_slot[b]]


# ------------------------------------------ the two-level oracle (large A, small)

_TWO_LEVEL = two_level.TwoLevelGame(num_actions=1000)
TB, TK, TS = 64, 16, 32  # searches in one call, samples, simulations


@sc.jit
def _two_level_search(keys, tables, root):
    return sampled_policy(tables, keys, root, _TWO_LEVEL.recurrent_fn, TS, num_samples=TK,
                          max_depth=2, temperature=0.0, dirichlet_fraction=0.0)


def test_inclusion_probability_quadrature_against_enumeration():
    """The exact P(a* in S) of two_level (classes, binomials, quadrature) against
    every ordered draw of k of 5 actions, and its NumPy Monte-Carlo estimate."""
    p = np.array([0.1, 0.3, 0.3, 0.15, 0.15])
    for k in (1, 2, 3):
        exact = _inclusion_probabilities(p, k)[0]
        got = two_level.inclusion_probability(0.1, np.array([0.3, 0.15]), np.array([2, 2]), k)
        np.testing.assert_allclose(got, exact, rtol=1e-6)
    game = _TWO_LEVEL
    exact = two_level.inclusion_probability(game.optimum_prior, *game.classes(), TK)
    mean, se = two_level.numpy_inclusion_estimate(game.prior(), game.ids[0], TK, 4000)
    assert abs(mean - exact) < 5 * se, (mean, exact, se)


def test_two_level_search_returns_the_optimum_exactly_when_it_is_sampled():
    """A = 1,000 root actions, the optimum behind a second level, K = 16, S = 32:
    64 searches in one call. Each returns the optimum if and only if it is among
    its root's samples (given its samples, the search finds their best), and
    the rate of that is within 4 standard errors of the exact P(a* in S) (0.307;
    measured 0.234 with these keys, 1.3 standard errors below)."""
    game = _TWO_LEVEL
    optimum, _ = game.ids
    keys = jax.random.split(jax.random.PRNGKey(2), TB)
    out = jax.device_get(_two_level_search(keys, game.tables(), game.root(TB)))
    valid = out.search_tree.children_index[:, 0] != jaxpuct.ILLEGAL
    held = np.any((out.sampled_actions == optimum) & valid, axis=1)
    np.testing.assert_array_equal(out.action == optimum, held)
    values = game.exact_values()[out.sampled_actions]
    np.testing.assert_array_equal(game.exact_values()[out.action],
                                  np.where(valid, values, -np.inf).max(-1))
    exact = two_level.inclusion_probability(game.optimum_prior, *game.classes(), TK)
    se = np.sqrt(exact * (1 - exact) / TB)
    assert abs(held.mean() - exact) < 4 * se, (held.mean(), exact)
