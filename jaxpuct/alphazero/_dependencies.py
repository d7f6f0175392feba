"""Imported first by the package: names the extra to install if one is missing."""

from jaxpuct._optional import require

require("jaxpuct.alphazero", ("flax", "optax", "orbax.checkpoint"), "train")
