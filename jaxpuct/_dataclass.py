"""The package's pytree dataclasses: ``chex.dataclass`` with a signature type checkers read.

At run time ``pytree_dataclass`` *is* ``chex.dataclass(frozen=True)`` (and
``mutable_pytree_dataclass`` is ``chex.dataclass``): a dataclass registered as a JAX
pytree, with chex's ``replace``. For a type checker it is a PEP 681
``dataclass_transform`` decorator that returns the class it is given. chex marks its
own decorator with ``dataclass_transform`` too, but the call form
``chex.dataclass(frozen=True)`` returns an unannotated inner function, through which
pyright does not see the transform: every constructor call would be reported as taking
no field.

``Replaceable`` is the classes' common base: empty at run time, it gives the
``replace`` method that chex adds to each class its type.
"""

# chex ships no stubs nor py.typed: pyright reads its sources, which is enough here.
# pyright: reportMissingTypeStubs=false

from __future__ import annotations

from typing import TYPE_CHECKING, Any, TypeVar

import chex

if TYPE_CHECKING:
    from typing_extensions import Self, dataclass_transform

_T = TypeVar("_T")


class Replaceable:
    """Base of the pytree dataclasses: the type of chex's ``replace``."""

    __slots__ = ()

    if TYPE_CHECKING:
        def replace(self, **changes: Any) -> Self:
            """A copy with ``changes`` applied (``dataclasses.replace``)."""
            ...


if TYPE_CHECKING:
    @dataclass_transform(frozen_default=True)
    def pytree_dataclass(cls: type[_T], /) -> type[_T]:
        """A frozen dataclass registered as a JAX pytree (``chex.dataclass``)."""
        ...

    @dataclass_transform()
    def mutable_pytree_dataclass(cls: type[_T], /) -> type[_T]:
        """A dataclass registered as a JAX pytree (``chex.dataclass``)."""
        ...
else:
    pytree_dataclass = chex.dataclass(frozen=True)
    mutable_pytree_dataclass = chex.dataclass
