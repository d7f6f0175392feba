"""The configuration of a self-play run, and its command line.

Two frozen dataclasses split the knobs by whether a resumed run may change them:

* :class:`SelfPlayConfig` decides what is computed (game, search, network,
  optimiser, learning-rate schedule, seed). It is saved with every checkpoint,
  and a resumed run must use the same values.
* :class:`RunOptions` decides how long the run goes and what it writes on the
  way (iterations, evaluation and checkpoint cadence, progress display, run
  directory). These may change on resume: ``--iterations 300 --resume`` extends
  a run that stopped at 200.

The command line of ``examples/selfplay.py`` is generated from the fields of both
(:func:`add_arguments`): the flag is the field name with dashes, the default is
the field's default, the help text is the field's entry in the class docstring's
``Attributes:`` section, and bounds / choices come from the field's metadata, so
there is one place to change a knob.
"""

from __future__ import annotations

import argparse
import dataclasses
import inspect
import re
import typing
from typing import Any

__all__ = [
    "MAX_MOVES",
    "NETWORKS",
    "OPTIMIZERS",
    "POLICIES",
    "POLICY_TARGETS",
    "LR_SCHEDULES",
    "SEARCH_SYMMETRIES",
    "RunOptions",
    "SelfPlayConfig",
    "add_arguments",
    "flag",
    "from_namespace",
]

OPTIMIZERS = ("adam", "sgd")
POLICIES = ("alphazero", "gumbel", "sampled")
NETWORKS = ("mlp", "resnet")
LR_SCHEDULES = ("constant", "cosine")
POLICY_TARGETS = ("played", "visits")
SEARCH_SYMMETRIES = ("none", "random", "average")
# Longest game per pgx game (pgx's own limits; go: 9 * 9 * 2 moves).
MAX_MOVES = {"tic_tac_toe": 9, "connect_four": 42, "othello": 130, "go_9x9": 162}


def _games() -> tuple[str, ...]:
    from jaxpuct.envs.pgx_games import PGX_GAMES
    return tuple(PGX_GAMES)


def _knob(default: Any, *, minimum: float | None = None, maximum: float | None = None,
          choices: Any = None, positive: bool = False) -> Any:
    """A dataclass field with the bounds that both validation and argparse use.

    ``choices`` may be a callable (evaluated lazily, so that importing this module
    does not import pgx)."""
    return dataclasses.field(default=default, metadata={
        "minimum": minimum, "maximum": maximum, "choices": choices, "positive": positive})


@dataclasses.dataclass(frozen=True)
class SelfPlayConfig:
    """Everything that decides what a run computes (hashable; saved with checkpoints).

    (Over 100 lines only through its field list and the field documentation,
    which is also the command line's help text.)

    Attributes:
      game: the pgx game.
      batch_size: B, games played in lockstep (a multiple of the device count).
      num_simulations: simulations per search.
      selfplay_steps: moves of every game per iteration.
      train_steps: optimiser steps per iteration.
      policy: the search: alphazero (PUCT with Dirichlet noise, visit-count
        targets) or gumbel (Gumbel MuZero, Danihelka et al. 2022: Gumbel noise
        instead of Dirichlet noise and temperature, the improved policy as the
        target) or sampled (Sampled MuZero's search, Hubert et al. 2021: PUCT over
        num_samples actions drawn at each node, the visit-count target over the
        root's samples, zero elsewhere).
      num_samples: sampled: actions drawn at each node (at most the game's).
      considered_actions: gumbel: actions considered at the root (Gumbel-Top-k).
      gumbel_scale: gumbel: scale of the root's Gumbel noise during the first
        temperature_moves plies (0 after them and in evaluation games).
      value_scale: gumbel: c_scale of the completed-Q transform
        (CompletedQConfig.value_scale; the target is softmax(logits + sigma),
        sigma = (maxvisit_init + max N) x value_scale x rescaled Q).
      maxvisit_init: gumbel: c_visit of the completed-Q transform
        (CompletedQConfig.maxvisit_init).
      temperature_moves: plies of each game sampled with temperature 1 (then
        greedy: the move and the stored visit target are the most visited action
        alone with policy_target played, AlphaGo Zero's infinitesimal
        temperature).
      policy_target: what policy alphazero or sampled stores as a ply's policy
        target: played (the distribution the move was drawn from, N^(1/T) at
        the ply's temperature T: the visit distribution in the first
        temperature_moves plies, the most visited action alone after them) or
        visits (the root's visit distribution N / sum N at every ply, whatever
        the move's temperature: AlphaZero's pseudocode and mctx's
        action_weights; with solver, the dominated proven moves' visits left
        out). Policy gumbel stores its improved policy either way and refuses
        visits; visits refuses early_stop.
      dirichlet_alpha: concentration of the Dirichlet noise at self-play roots.
      dirichlet_fraction: weight of that noise in the root prior.
      max_moves: trajectory length kept per game (default: the game's move limit).
      buffer_size: replay buffer rows (at least batch_size x max_moves).
      train_batch_size: minibatch rows per optimiser step.
      optimizer: adam, or sgd with momentum.
      learning_rate: peak learning rate.
      lr_schedule: constant, or cosine decay from learning_rate to
        lr_final_fraction x learning_rate over lr_decay_steps optimiser steps,
        constant after (so a run can be extended past the horizon).
      lr_decay_steps: horizon of the cosine decay, in optimiser steps.
      lr_final_fraction: learning rate at the end of the cosine decay, as a
        fraction of learning_rate.
      momentum: sgd momentum.
      weight_decay: coupled L2 decay: weight_decay x w is added to the gradient
        of every weight matrix / convolution kernel (not biases or norm scales)
        before the optimiser, as optax.add_decayed_weights does.
      value_weight: weight of the value MSE in the loss.
      value_target_mix: weight w of the root's search value in the value
        target, (1 - w) x game outcome + w x root value (0: the outcome alone,
        as AlphaZero).
      symmetry_augment: replace each training row by a random symmetry of the
        board (connect_four: the left-right mirror; tic_tac_toe: the 8
        rotations and reflections).
      network: mlp or resnet.
      hidden: MLP layer widths, comma-separated.
      blocks: residual blocks of the ResNet.
      channels: channels of the ResNet.
      reuse_tree: start each search from the subtree of the previous one (new
        simulations add to the visits already there).
      graph_search: Monte-Carlo graph search (transpositions share one node,
        found with the pgx adapter's Zobrist hash).
      solver: the MCTS-solver in every search (Winands et al. 2008;
        jaxpuct.solver): terminal outcomes are proven and backed up, walks stop
        at proven nodes, the move takes a proven win; not with policy sampled.
      search_symmetry: how every search (self-play, evaluation, the arena) sees
        the network, under the board's symmetries (jaxpuct.envs.symmetries):
        none; random (each node evaluated under one symmetry drawn at random,
        as AlphaGo and AlphaGo Zero did); average (the mean of the network
        over all the symmetries, an ensemble at K times the network's work:
        connect_four K = 2, the other games 8).
      early_stop: in the games past temperature_moves, a search stops taking
        simulations once no other root action can overtake the most visited one
        (jaxpuct.early_stop; Leela Chess Zero's smart pruning at factor 1). Their
        move is that action and their target, at temperature 0, is that action
        alone, so games and policy targets are the same as without; what changes
        is the root value (value_target_mix) and a reused tree's visits, taken
        from fewer simulations. A lockstep search ends only when all its trees
        stop, and games in their first temperature_moves plies never do. Policy
        alphazero or sampled (a Gumbel root refuses it).
      opening_random_moves: M > 0: every new self-play game (not the evaluation
        games) first plays k uniformly random legal moves, k drawn uniformly from
        0..M per game, and only then starts searching and storing plies; a random
        move that would end the game is skipped, so every game starts live. The
        games then cover positions that self-play alone seldom reaches (as the
        random games of Pons' connect-four test sets); the openings themselves
        are not trained on, and temperature_moves counts from the first searched
        ply, as do the metrics first_player_win_rate (the player to move there) and
        mean_game_length. 0: every game starts at the initial position.
      opening_share: the probability that a new self-play game gets a random
        opening (opening_random_moves); the others start at the initial position,
        so that part of the data stays on the lines that play from there reaches.
        Below 1 only with opening_random_moves > 0.
      max_nodes: tree capacity (0: num_simulations + 1, or twice the simulations
        with reuse_tree).
      seed: the run's RNG seed.
    """

    game: str = _knob("tic_tac_toe", choices=_games)
    batch_size: int = _knob(128, minimum=1)
    num_simulations: int = _knob(32, minimum=1)
    selfplay_steps: int = _knob(9, minimum=1)
    train_steps: int = _knob(8, minimum=0)
    policy: str = _knob("alphazero", choices=POLICIES)
    num_samples: int = _knob(8, minimum=1)
    considered_actions: int = _knob(16, minimum=1)
    gumbel_scale: float = _knob(1.0, minimum=0.0)
    # The defaults are CompletedQConfig's (mctx's), so a run without the flags
    # searches exactly as before.
    value_scale: float = _knob(0.1, positive=True)
    maxvisit_init: float = _knob(50.0, minimum=0.0)
    temperature_moves: int = _knob(3, minimum=0)
    policy_target: str = _knob("played", choices=POLICY_TARGETS)
    dirichlet_alpha: float = _knob(1.0, positive=True)
    dirichlet_fraction: float = _knob(0.25, minimum=0.0, maximum=1.0)
    max_moves: int | None = _knob(None, minimum=1)
    buffer_size: int = _knob(8192, minimum=1)
    train_batch_size: int = _knob(256, minimum=1)
    optimizer: str = _knob("adam", choices=OPTIMIZERS)
    learning_rate: float = _knob(2e-3, positive=True)
    lr_schedule: str = _knob("cosine", choices=LR_SCHEDULES)
    lr_decay_steps: int = _knob(800, minimum=1)
    lr_final_fraction: float = _knob(0.05, minimum=0.0, maximum=1.0)
    momentum: float = _knob(0.9, minimum=0.0)
    # 2e-4 in the gradient is the former 1e-4 * ||w||^2 loss penalty (d/dw = 2e-4 w).
    weight_decay: float = _knob(2e-4, minimum=0.0)
    value_weight: float = _knob(1.0, minimum=0.0)
    value_target_mix: float = _knob(0.0, minimum=0.0, maximum=1.0)
    symmetry_augment: bool = False
    network: str = _knob("mlp", choices=NETWORKS)
    hidden: tuple[int, ...] = _knob((128, 128), minimum=1)
    blocks: int = _knob(4, minimum=1)
    channels: int = _knob(32, minimum=1)
    reuse_tree: bool = False
    graph_search: bool = False
    solver: bool = False
    search_symmetry: str = _knob("none", choices=SEARCH_SYMMETRIES)
    early_stop: bool = False
    opening_random_moves: int = _knob(0, minimum=0)
    opening_share: float = _knob(1.0, minimum=0.0, maximum=1.0)
    max_nodes: int = _knob(0, minimum=0)
    seed: int = 0

    def __post_init__(self):
        _validate(self)
        if self.policy == "sampled" and (self.reuse_tree or self.graph_search):
            raise ValueError("policy sampled (--policy sampled) does not take reuse_tree "
                             "(--reuse-tree) nor graph_search (--graph-search): its tree "
                             "is continued through its sampled slots, and graph search "
                             "refuses sampled trees")
        if self.policy == "sampled" and self.solver:
            raise ValueError("policy sampled (--policy sampled) does not take solver "
                             "(--solver): a node's sampled actions are not all its moves, "
                             "so a loss cannot be proven from them")
        if self.early_stop and self.policy == "gumbel":
            raise ValueError("early_stop (--early-stop) needs policy alphazero or sampled, got "
                             "gumbel: Gumbel's move and target read more than which root "
                             "action is most visited")
        if self.policy_target == "visits" and self.policy == "gumbel":
            raise ValueError("policy_target (--policy-target) visits needs policy alphazero "
                             "or sampled, got gumbel: Gumbel's target is its improved "
                             "policy, not its visit counts")
        if self.policy_target == "visits" and self.early_stop:
            raise ValueError("policy_target (--policy-target) visits excludes early_stop "
                             "(--early-stop): a search that stops early leaves visit "
                             "counts of fewer simulations, and the target learns from them")
        if self.opening_share < 1.0 and self.opening_random_moves == 0:
            raise ValueError(f"opening_share (--opening-share) {self.opening_share} needs "
                             "opening_random_moves (--opening-random-moves) > 0, got 0: "
                             "without openings there is no share of games to give them")
        if self.symmetry_augment:
            from jaxpuct.alphazero.symmetry import SYMMETRIC_GAMES
            if self.game not in SYMMETRIC_GAMES:
                raise ValueError(f"symmetry_augment (--symmetry-augment) supports "
                                 f"{', '.join(SYMMETRIC_GAMES)}, not {self.game}")
        if self.buffer_size < self.batch_size * self.trajectory_length:
            raise ValueError(
                f"buffer_size ({self.buffer_size}) must be at least batch_size * max_moves "
                f"= {self.batch_size} * {self.trajectory_length} = "
                f"{self.batch_size * self.trajectory_length}")

    @property
    def capacity(self) -> int:
        """Tree capacity in nodes (``max_nodes``, or the automatic choice)."""
        if self.max_nodes:
            return self.max_nodes
        return (2 if self.reuse_tree else 1) * self.num_simulations + 1

    @property
    def graph(self):
        """The search's ``GraphConfig`` with ``graph_search``, else ``None``."""
        from jaxpuct.graph import GraphConfig
        return GraphConfig() if self.graph_search else None

    @property
    def trajectory_length(self) -> int:
        """``T``: plies kept per game (``max_moves`` or the game's limit)."""
        return self.max_moves if self.max_moves is not None else MAX_MOVES[self.game]

    def to_json(self) -> dict[str, Any]:
        return {k: list(v) if isinstance(v, tuple) else v
                for k, v in dataclasses.asdict(self).items()}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> SelfPlayConfig:
        data = dict(data)
        data["hidden"] = tuple(data["hidden"])
        return cls(**data)


@dataclasses.dataclass(frozen=True)
class RunOptions:
    """How long a run goes and what it writes; may change when resuming.

    Attributes:
      iterations: total iterations (a resumed run continues up to this number).
      eval_every: evaluate every this many iterations (0: only at the end).
      checkpoint_every: checkpoint every this many iterations (0: only at the end).
      keep_checkpoints: newest verified checkpoints kept on disk (older ones are
        deleted only after a newer one has been written and read back intact).
      run_dir: directory of checkpoints, config.json and metrics.
      resume: continue from the newest intact checkpoint in run_dir.
      resume_step: with resume, continue from this checkpoint iteration instead
        of the newest.
      overwrite: delete the checkpoints already in run_dir and start afresh.
      progress: show a progress bar.
      plot: write metrics.png at the end.
      mcts_simulations: simulations of OpenSpiel's MCTSBot (UCT c=2, one random
        rollout per leaf, solve) as an extra evaluation opponent (0: none;
        tic_tac_toe, connect_four and othello; needs open-spiel).
      mcts_every: play MCTSBot every this many iterations (0: at every evaluation).
      mcts_games: games against MCTSBot per evaluation, half per colour.
      mcts_agent_simulations: the agent's simulations per move in the games
        against MCTSBot (0: the run's num_simulations).
      max_minutes: stop after this many minutes spent in self-play and training
        (evaluations and checkpoints not counted; 0: no limit), with the final
        evaluation and checkpoint as at --iterations.
    """

    iterations: int = _knob(100, minimum=1)
    eval_every: int = _knob(25, minimum=0)
    checkpoint_every: int = _knob(25, minimum=0)
    keep_checkpoints: int = _knob(2, minimum=2)
    run_dir: str = "runs/selfplay"
    resume: bool = False
    resume_step: int | None = _knob(None, minimum=0)
    overwrite: bool = False
    progress: bool = True
    plot: bool = True
    mcts_simulations: int = _knob(0, minimum=0)
    mcts_every: int = _knob(0, minimum=0)
    mcts_games: int = _knob(64, minimum=2)
    mcts_agent_simulations: int = _knob(0, minimum=0)
    max_minutes: float = _knob(0.0, minimum=0.0)

    def __post_init__(self):
        _validate(self)
        if self.resume and self.overwrite:
            raise ValueError("--resume and --overwrite exclude each other")
        if self.resume_step is not None and not self.resume:
            raise ValueError("--resume-step needs --resume")


def flag(name: str) -> str:
    """The command-line flag of a field: ``batch_size`` -> ``--batch-size``."""
    return "--" + name.replace("_", "-")


def _hints(cls) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def _choices(field: dataclasses.Field) -> tuple | None:
    choices: Any = field.metadata.get("choices")  # field metadata is untyped
    if callable(choices):
        made: Any = choices()
        return tuple(made)
    return choices


def _validate(obj) -> None:
    """Checks every field against its type and metadata bounds (names the flag too)."""
    hints = _hints(type(obj))
    for field in dataclasses.fields(obj):
        value = getattr(obj, field.name)
        if value is None:
            continue
        what = f"{field.name} ({flag(field.name)})"
        base = _base_type(hints[field.name])
        items = value if base is tuple else (value,)
        kind = int if base is tuple else base
        for item in items:
            if kind is int and (not isinstance(item, int) or isinstance(item, bool)):
                raise ValueError(f"{what} must be an int, got {value!r}")
            if kind is float and not isinstance(item, int | float):
                raise ValueError(f"{what} must be a number, got {value!r}")
            minimum = field.metadata.get("minimum")
            if minimum is not None and item < minimum:
                raise ValueError(f"{what} must be >= {minimum}, got {value!r}")
            maximum = field.metadata.get("maximum")
            if maximum is not None and item > maximum:
                raise ValueError(f"{what} must be <= {maximum}, got {value!r}")
            if field.metadata.get("positive") and not item > 0:
                raise ValueError(f"{what} must be > 0, got {value!r}")
        choices = _choices(field)
        if choices is not None and value not in choices:
            raise ValueError(f"unknown {field.name} {value!r}; accepted: {', '.join(choices)}")


def _base_type(hint: Any) -> type:
    """``int | None`` -> ``int``; ``tuple[int, ...]`` -> ``tuple``."""
    args = [a for a in typing.get_args(hint) if a is not type(None)]
    origin = typing.get_origin(hint)
    if origin is tuple:
        return tuple
    if args and origin is not None:
        return args[0]
    return hint


def docstring_attributes(cls) -> dict[str, str]:
    """Field name -> its text in the ``Attributes:`` section of ``cls``'s docstring."""
    doc = inspect.getdoc(cls) or ""
    section = doc.split("Attributes:", 1)[1] if "Attributes:" in doc else ""
    out: dict[str, str] = {}
    name = None
    for line in section.splitlines():
        match = re.match(r"^  (\w+): (.*)$", line)
        if match:
            name = match.group(1)
            out[name] = match.group(2).strip()
        elif name and line.startswith("    "):
            out[name] += " " + line.strip()
        elif line.strip():
            break
    return out


def positive_ints(text: str) -> tuple[int, ...]:
    """An argparse type: ``"128,128"`` -> ``(128, 128)``, every entry >= 1
    (``ArgumentTypeError`` naming the text otherwise)."""
    try:
        values = tuple(int(w) for w in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected comma-separated positive integers like 128,128, got {text!r}") from None
    if min(values) < 1:
        raise argparse.ArgumentTypeError(f"expected positive integers, got {text!r}")
    return values


def _arg_type(base: type, field: dataclasses.Field):
    """An argparse type that checks the field's bounds and names the expectation."""
    minimum = field.metadata.get("minimum")
    positive = field.metadata.get("positive")
    if base is tuple:
        return positive_ints
    if positive:
        what = "a positive number"
    elif minimum == 1:
        what = "a positive integer"
    elif minimum is not None:
        what = f"{'an integer' if base is int else 'a number'} >= {minimum}"
    else:
        what = "an integer" if base is int else "a number"

    def parse(text: str):
        try:
            value = base(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}") from None
        if (minimum is not None and value < minimum) or (positive and not value > 0):
            raise argparse.ArgumentTypeError(f"expected {what}, got {value}")
        return value

    return parse


def add_arguments(parser: argparse.ArgumentParser, cls,
                  defaults: dict[str, Any] | None = None) -> None:
    """Adds one flag per field of the dataclass ``cls`` (see the module docstring).

    Args:
      parser: best built with ``argparse.ArgumentDefaultsHelpFormatter`` so that
        ``--help`` shows every default.
      cls: :class:`SelfPlayConfig` or :class:`RunOptions`.
      defaults: overrides of field defaults (e.g. the demo's), by field name.
    """
    defaults = defaults or {}
    helps = docstring_attributes(cls)
    hints = _hints(cls)
    group = parser.add_argument_group(cls.__name__)
    for field in dataclasses.fields(cls):
        default = defaults.get(field.name, field.default)
        help_text = helps.get(field.name)
        if help_text is None:
            raise TypeError(f"{cls.__name__}.{field.name} has no entry in the docstring")
        # argparse %-formats help strings; a literal "%" in a docstring breaks --help.
        help_text = help_text.replace("%", "%%")
        base = _base_type(hints[field.name])
        if base is bool:
            group.add_argument(flag(field.name), default=default, help=help_text,
                               action=argparse.BooleanOptionalAction)
            continue
        group.add_argument(flag(field.name), default=default, help=help_text,
                           type=_arg_type(base, field) if base is not str else str,
                           choices=_choices(field), dest=field.name)


def from_namespace(cls, args: argparse.Namespace):
    """The ``cls`` instance made of the parsed flags of its fields."""
    return cls(**{f.name: getattr(args, f.name) for f in dataclasses.fields(cls)})
