"""The frame every policy shares: checks, keys, the root prior and noise, once.

A policy (``alphazero_policy``, ``gumbel_policy``, ``stochastic_policy``) is
this frame plus its own rule, expander and final move, in the way pgx's
``Env.step`` does the shared bookkeeping once and calls a game's own step:

1. :func:`engine_options` turns the engine keywords that every policy accepts
   (``max_depth``, ``leaves_per_step``, ``virtual_loss``, ``solver``,
   ``early_stop``, and whether the move needs the second moment) into an
   :class:`EngineConfig` and the extensions, refusing a meaningless combination
   with a ``ValueError``;
2. :func:`prepare` checks the root (or the tree to continue) and the root
   mask, splits the keys (one shared key for the model, per-tree keys for noise
   and the move), adds Dirichlet noise to the root prior if asked, and builds
   or restricts the tree with every extension's fields;
3. :func:`search` runs the engine.
"""

from __future__ import annotations

import dataclasses
from typing import Any, NamedTuple

import chex
import jax
import jax.numpy as jnp
import numpy as np

from jaxpuct import early_stop as early_stop_lib
from jaxpuct import engine as engine_lib
from jaxpuct import extensions as ext_lib
from jaxpuct import prng, validation
from jaxpuct.engine import EngineConfig, SearchKeys
from jaxpuct.expanders import Expander
from jaxpuct.graph import GraphConfig
from jaxpuct.roots import prepare_tree, root_noise, root_prior_and_legal
from jaxpuct.selection import PUCTConfig, SelectionRule, puct_rule
from jaxpuct.solver import Solver, solver_config
from jaxpuct.tree import ILLEGAL, ChanceLayout, SampledLayout, Tree
from jaxpuct.virtual_loss import VirtualLoss


@dataclasses.dataclass(frozen=True)
class Options:
    """What the engine keywords of a policy call mean (static).

    Attributes:
      config: the loop's configuration.
      extensions: the extensions, in hook order.
      solver: the solver's extension, or ``None``.
      early_stop: the ``early_stop`` the policy was given (``True``, or a ``[B]``
        mask, see :func:`prepare`) when early stopping is on, else ``None``.
    """

    config: EngineConfig
    extensions: tuple[ext_lib.Extension, ...]
    solver: Solver | None
    early_stop: Any = None


def engine_options(num_simulations: int, max_depth: int | None, max_nodes_hint: int, *,
                   leaves_per_step: int = 1, virtual_loss: VirtualLoss | None = None,
                   solver: Any = False, second_moment: bool = False,
                   tree_bounds: bool = False,
                   backup: engine_lib.Backup | None = None,
                   early_stop: Any = False) -> Options:
    """Checks the engine keywords and returns the loop's configuration.

    ``max_depth`` defaults to ``max_nodes_hint`` (the tree's capacity: no path is
    longer). ``virtual_loss`` is refused with one leaf per step (nothing would
    read it). ``solver``: ``bool``, ``None`` or a ``SolverConfig``.
    ``early_stop``: ``False``/``None`` (off), ``True``, or a ``[B]`` bool mask
    (on for the trees where it is set; :mod:`jaxpuct.early_stop`).
    """
    validation.check_int("num_simulations", num_simulations, 1)
    validation.check_int("leaves_per_step", leaves_per_step, 1)
    validation.check_instance("virtual_loss", virtual_loss, VirtualLoss, allow_none=True)
    if virtual_loss is not None and leaves_per_step == 1:
        raise ValueError(
            f"virtual_loss={virtual_loss!r} needs leaves_per_step > 1: it keeps apart the "
            "walks of one search step, and with leaves_per_step=1 there is one walk per "
            "step (omit virtual_loss, or raise leaves_per_step).")
    depth = max_nodes_hint if max_depth is None else validation.check_int(
        "max_depth", max_depth, 1)
    config = EngineConfig(num_simulations=num_simulations, max_depth=depth,
                          leaves_per_step=leaves_per_step,
                          virtual_loss=VirtualLoss() if virtual_loss is None else virtual_loss,
                          backup=backup)
    solver_cfg = solver_config(solver)
    extensions: list[ext_lib.Extension] = []
    if second_moment:
        extensions.append(ext_lib.SecondMoment())
    if tree_bounds:
        extensions.append(ext_lib.TreeMinMax())
    solver_ext = None if solver_cfg is None else Solver(solver_cfg)
    if solver_ext is not None:
        extensions.append(solver_ext)
    on = early_stop_on(early_stop)
    if on:
        extensions.append(early_stop_lib.EarlyStop(num_simulations, leaves_per_step))
    return Options(config=config, extensions=tuple(extensions), solver=solver_ext,
                   early_stop=early_stop if on else None)


def early_stop_on(early_stop: Any) -> bool:
    """Whether ``early_stop`` turns early stopping on: ``True`` or an array (a
    per-tree mask, possibly traced); ``False`` and ``None`` do not."""
    if early_stop is None or isinstance(early_stop, (bool, np.bool_)):
        return bool(early_stop)
    if isinstance(early_stop, (int, float, str)):
        raise ValueError("early_stop must be a bool or a [B] bool mask, got "
                         f"{early_stop!r} of type {type(early_stop).__name__}.")
    return True


def check_early_stop_move(early_stop: Any, final_move: str,
                          value_weighted: bool = False) -> None:
    """Refuse early stopping with a move that reads the root's values.

    Early stopping (:mod:`jaxpuct.early_stop`) keeps only which root action is the
    most visited; the LCB move and the value-weighted move also read the values,
    which the skipped simulations would still change. One message for every policy
    that offers both.
    """
    if not early_stop_on(early_stop) or not (value_weighted or final_move == "lcb"):
        return
    chosen = "value_weighted=True" if value_weighted else "final_move='lcb'"
    fix = ("final_move='visits' without value_weighted" if value_weighted
           else "final_move='visits'")
    raise ValueError(
        f"early_stop needs a move that is the most visited root action, got {chosen}: "
        "early stopping keeps only which action is most visited, and this move also "
        "reads the values, which the skipped simulations would still change. Use "
        f"{fix}, or no early_stop.")


def batch_size(root: Any, tree: Tree | None) -> int:
    """``B`` of a policy call: the continued tree's (checked to be a jaxpuct tree),
    else the root's (checked)."""
    if tree is None:
        return validation.check_root(root)[0]
    validation.check_tree_object("tree", tree)
    return tree.batch_size


def capacity(tree: Tree | None, max_nodes: int | None, num_simulations: int) -> int:
    """The node capacity the search will have: the continued tree's, else
    ``max_nodes`` (checked) or ``num_simulations + 1``."""
    if tree is not None:
        validation.check_tree_object("tree", tree)
        return tree.max_nodes
    if max_nodes is None:
        return num_simulations + 1
    return validation.check_int("max_nodes", max_nodes, 1)


def selection_rule(selection: Any, options: Options) -> SelectionRule:
    """``selection`` (a ``PUCTConfig`` or a ``SelectionRule``) as the rule the walk
    uses, wrapped by the extensions (the solver's PUCT rule, for one)."""
    if isinstance(selection, PUCTConfig):
        rule = puct_rule(selection)
    elif isinstance(selection, SelectionRule):
        rule = selection
    else:
        raise ValueError("selection must be a PUCTConfig or a SelectionRule, got "
                         f"{selection!r} of type {type(selection).__name__}.")
    return ext_lib.wrap_rule(options.extensions, rule, selection)


def needs_tree_bounds(selection: Any) -> bool:
    """Whether ``selection`` reads ``Tree.minmax_low``/``minmax_high`` (a
    ``PUCTConfig(minmax_bounds="tree")``)."""
    return bool(getattr(selection, "needs_tree_bounds", False))


def needs_second_moment(selection: Any) -> bool:
    """Whether ``selection`` reads ``Tree.node_sq_values`` (a ``SelectionRule`` may
    say so with a ``needs_second_moment`` attribute)."""
    return bool(getattr(selection, "needs_second_moment", False))


class Prepared(NamedTuple):
    """A policy call after the frame: the tree to search and what the move needs.

    Attributes:
      tree: the tree, new or continued, with the extensions' fields.
      keys: the search's keys.
      sample_keys: ``[B]`` per-tree keys for the move (Gumbel's draw uses them).
      prior: ``[B, A]`` the network's root prior (no noise), 0 where illegal.
      legal: ``[B, A]`` bool root mask (the root's or the tree's, minus
        ``invalid_actions``).
    """

    tree: Tree
    keys: SearchKeys
    sample_keys: jax.Array
    prior: jax.Array
    legal: jax.Array


def prepare(root: Any, rng_key: jax.Array, num_simulations: int,
            invalid_actions: jax.Array | None, options: Options, *,
            tree: Tree | None = None, max_nodes: int | None = None,
            graph: GraphConfig | None = None,
            noise: tuple[chex.Numeric, chex.Numeric, jax.Array | None] | None = None,
            root_prior: jax.Array | None = None,
            chance: ChanceLayout | None = None,
            sampled: SampledLayout | None = None) -> Prepared:
    """Checks the call once and prepares the tree (module docstring).

    ``noise``: ``(dirichlet_fraction, dirichlet_alpha, draw)`` to mix into the
    root prior (``draw``: ``[B, A]`` given noise, or ``None`` to draw per tree;
    skipped when the fraction is a concrete 0; :func:`jaxpuct.roots.root_noise`),
    or ``None`` (no noise, and
    a continued tree keeps its root prior); ``root_prior``: ``[B, A]`` the
    caller's own prior to select with at the root instead (shape checked).
    ``chance``: the :class:`jaxpuct.tree.ChanceLayout` of a search with chance
    nodes (a new tree gets it; a continued tree must have it), ``None`` for a
    search without (a continued tree must have none); the noise is then drawn
    over the ``chance.num_actions`` decision actions only. ``sampled``: the
    :class:`jaxpuct.tree.SampledLayout` of a search over sampled actions (the
    same rule: a new tree gets it, a continued one must have it). With early stopping
    given as a ``[B]`` (or scalar array) bool mask in ``options``, only the trees
    where it is set may stop early.
    """
    validation.check_instance("graph", graph, GraphConfig, allow_none=True)
    if tree is None:
        batch_size, num_actions = validation.check_root(root)
    else:
        batch_size, num_actions = validation.check_continued_tree(tree, root, max_nodes, graph)
        if tree.chance != chance:
            raise ValueError(
                f"tree has chance-node layout {tree.chance!r}, but this search expects "
                f"{chance!r}: a tree with chance nodes is continued by stochastic_policy "
                "(or stochastic_search) only, and a tree without by the other policies.")
        if tree.sampled != sampled:
            raise ValueError(
                f"tree has sampled-action layout {tree.sampled!r}, but this search expects "
                f"{sampled!r}: a tree of sampled actions is continued by sampled_policy "
                "only (with the same num_samples, action space and prior_correction), and "
                "a tree of all actions by the other policies.")
    if invalid_actions is not None:
        validation.check_mask("invalid_actions", invalid_actions, (batch_size, num_actions))
    shared_key, element_keys = validation.split_keys(rng_key, batch_size)
    pairs = prng.split(element_keys, 2)
    noise_keys, sample_keys = pairs[:, 0], pairs[:, 1]
    if tree is None:
        prior, legal = root_prior_and_legal(root, invalid_actions)
    else:
        legal = tree.children_index[:, Tree.ROOT_INDEX] != ILLEGAL
        if invalid_actions is not None:
            legal = legal & ~invalid_actions.astype(jnp.bool_)
        prior = jnp.where(legal, tree.children_prior[:, Tree.ROOT_INDEX], 0.0)
    if root_prior is not None:
        validation.check_shape("root_prior", root_prior, (batch_size, num_actions))
    # With noise asked for (even a zero fraction), the root selects with the
    # network prior or its noised mix, also in a continued tree; without, a
    # continued tree keeps the root prior it has.
    if noise is not None:
        fraction, alpha, draw = noise
        root_prior = prior
        if validation.concrete_value(fraction) is None or fraction != 0:
            width = num_actions if chance is None else chance.num_actions
            # A traced non-finite fraction (NaN, inf) means no noise, so one bad
            # number cannot poison the root prior.
            fraction = jnp.where(jnp.isfinite(fraction), jnp.clip(fraction, 0.0, 1.0), 0.0)
            noised = root_noise(noise_keys, prior[:, :width], legal[:, :width], fraction,
                                alpha, draw)
            root_prior = jnp.pad(noised, ((0, 0), (0, num_actions - width)))
    prepared = prepare_tree(root, num_simulations, max_nodes=max_nodes,
                            invalid_actions=invalid_actions, root_prior=root_prior,
                            tree=tree, graph=graph, extensions=options.extensions,
                            root_prior_legal=(prior, legal))
    if tree is None and chance is not None:
        prepared = prepared.replace(chance=chance)
    if tree is None and sampled is not None:
        prepared = prepared.replace(sampled=sampled)
    if options.early_stop is not None and options.early_stop is not True:
        mask = options.early_stop
        validation.check_scalar_or_batch("early_stop", mask, batch_size)
        validation.check_mask("early_stop", mask, tuple(jnp.shape(mask)))
        prepared = early_stop_lib.enable_only(prepared, mask)
    return Prepared(tree=prepared, keys=SearchKeys(shared_key, element_keys),
                    sample_keys=sample_keys, prior=prior, legal=legal)


def search(params: Any, prepared: Prepared, expander: Expander, rule: SelectionRule,
           options: Options) -> tuple[Tree, Any]:
    """Runs the engine on a prepared call; returns the tree and the expander's counts."""
    return engine_lib.run(params, prepared.keys, prepared.tree, expander, rule,
                          options.extensions, options.config)
