"""Regional compilation: each block of the model's largest list of repeated blocks compiled in
place (``Module.compile``), the rest left eager. The blocks share their code, so torch compiles
it once and reuses it for each instance: the cold compile of a model of many identical blocks
(a transformer's layers) is about one block's. What the trial process compiles for a
``regional`` config, and what :meth:`tuner.Recommendation.apply` compiles in production: the
same blocks, found by the same rule.

The blocks: the outermost submodules of one class. Which class: the one a factory names
(``factory.regional_block``, :data:`REGIONAL_BLOCK`), or the one the
study recorded (the row's ``region_class``), else the children's class of the largest
``nn.ModuleList`` or ``nn.Sequential`` whose children (two or more, each with submodules of
its own) share one class: largest by the parameters they hold, then by their count.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch

# The attribute of a factory (``--model pkg.mod:factory``) that names its model's repeated
# block: the class, or its ``__qualname__``.
REGIONAL_BLOCK = "regional_block"

# What a model without repeated blocks says, for the trial's record and apply's error.
NO_BLOCKS = ("has no repeated blocks to compile (no nn.ModuleList or nn.Sequential of two or "
             "more blocks of one class)")


class NoRegions(Exception):
    """The model has no blocks to compile regionally; the message says why, in one line."""


@dataclasses.dataclass(frozen=True)
class Regions:
    """The blocks a regional compile compiles: their class (``__qualname__``) and their names
    in the model (``encoder.layers.0``, ...), outermost first."""

    block_class: str
    names: tuple[str, ...]


def find_regions(model: torch.nn.Module, block: type | str | None = None) -> Regions:
    """The blocks of ``model`` to compile: the outermost submodules of class ``block`` (a
    class or its ``__qualname__``), or where it is None, of the largest repeated class.

    Raises:
        NoRegions: none of that class, or no repeated blocks at all.
    """
    if block is not None and not isinstance(block, (type, str)):
        raise NoRegions(f"the block to compile regionally must be a class or a class name, "
                        f"not {type(block).__name__}")
    name = (block.__qualname__ if isinstance(block, type) else block) if block is not None \
        else _largest_repeated_class(model)
    if name is None:
        raise NoRegions(f"the model ({type(model).__name__}) {NO_BLOCKS}")
    names = _outermost(model, name)
    if not names:
        raise NoRegions(f"the model ({type(model).__name__}) has no submodule of class {name} "
                        "to compile regionally")
    return Regions(name, tuple(names))


def compile_regions(model: torch.nn.Module, regions: Regions, **compile_kwargs: Any) -> None:
    """Compile each block of ``regions`` in place (``Module.compile``: the block keeps its
    place, its parameters and its state-dict keys), with ``torch.compile``'s arguments."""
    for name in regions.names:
        model.get_submodule(name).compile(**compile_kwargs)


def _largest_repeated_class(model: torch.nn.Module) -> str | None:
    """The class of the children of the largest ModuleList or Sequential whose children share
    one class and are blocks (modules with submodules, not single layers); None if none is."""
    from torch import nn

    best: tuple[int, int] | None = None
    chosen = None
    for module in model.modules():
        if not isinstance(module, (nn.ModuleList, nn.Sequential)):
            continue
        children = list(module.children())
        kinds = {type(child) for child in children}
        if len(children) < 2 or len(kinds) != 1:
            continue
        kind = kinds.pop()
        if issubclass(kind, (nn.ModuleList, nn.ModuleDict)) or not any(
                True for _ in children[0].children()):
            continue  # a container is never called; a single layer is no block
        size = (sum(p.numel() for child in children for p in child.parameters()), len(children))
        if best is None or size > best:
            best, chosen = size, kind.__qualname__
    return chosen


def _outermost(model: torch.nn.Module, class_name: str) -> list[str]:
    """The names of the submodules of that class that are not inside another of them (the
    model itself is the whole scope, not a region)."""
    names: list[str] = []
    for name, module in model.named_modules():
        if name and type(module).__qualname__ == class_name \
                and not any(name.startswith(outer + ".") for outer in names):
            names.append(name)
    return names
