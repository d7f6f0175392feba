"""AlphaZero-style training around the search: networks, self-play, training loop.

Imports Flax, optax and orbax; ``import jaxpuct`` alone does not load this package.
"""
