"""Which blocks a regional compile compiles (:mod:`tuner.runtime.regions`): found on the model
alone, the same in the trial and in production. No compile runs here: ``Module.compile`` only
wraps the block until its first call (tests/integration/test_regional.py calls it)."""

from __future__ import annotations

import pytest
from torch import nn

from tests.support.models import Block, TinyStack
from tuner.runtime.regions import NoRegions, Regions, compile_regions, find_regions


class _TwoStacks(nn.Module):
    """Four narrow blocks and two wide ones: the wide ones hold more parameters."""

    def __init__(self) -> None:
        super().__init__()
        self.narrow = nn.ModuleList(Block(4) for _ in range(4))
        self.wide = nn.Sequential(*(_Wide() for _ in range(2)))


class _Wide(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.inner = Block(64)


class _Nested(nn.Module):
    """A block that holds a smaller one of its own class (depth 1: one inside)."""

    def __init__(self, depth: int) -> None:
        super().__init__()
        self.layer = nn.Linear(4, 4)
        self.inner = _Nested(depth - 1) if depth else None


def test_the_blocks_of_the_largest_list_of_repeated_blocks_are_found():
    assert find_regions(TinyStack()) == Regions("Block", ("blocks.0", "blocks.1", "blocks.2"))


def test_a_block_inside_a_block_of_its_class_is_compiled_with_it_not_again():
    model = nn.ModuleList(_Nested(1) for _ in range(2))
    assert find_regions(model) == Regions("_Nested", ("0", "1"))


def test_largest_means_most_parameters_not_most_blocks():
    assert find_regions(_TwoStacks()) == Regions("_Wide", ("wide.0", "wide.1"))


def test_a_named_class_is_compiled_where_it_is_outermost():
    # Block is inside each _Wide too: named, every outermost Block is compiled.
    assert find_regions(_TwoStacks(), Block).names == (
        "narrow.0", "narrow.1", "narrow.2", "narrow.3", "wide.0.inner", "wide.1.inner")
    assert find_regions(_TwoStacks(), "Block") == find_regions(_TwoStacks(), Block)


@pytest.mark.parametrize("model, block, said", [
    (nn.Sequential(nn.Linear(4, 4), nn.Linear(4, 4), nn.Linear(4, 4)), None,
     "the model (Sequential) has no repeated blocks to compile"),
    (nn.Sequential(nn.Linear(4, 4), Block(4)), None, "has no repeated blocks"),
    (TinyStack(), "DecoderLayer", "the model (TinyStack) has no submodule of class DecoderLayer"),
    (TinyStack(), 3, "must be a class or a class name, not int"),
], ids=["single layers", "one block", "a class it lacks", "not a class"])
def test_a_model_without_the_blocks_says_why_in_one_line(model, block, said):
    with pytest.raises(NoRegions) as exc:
        find_regions(model, block)
    assert said in str(exc.value) and "\n" not in str(exc.value)


def test_only_the_blocks_are_compiled_and_the_model_keeps_its_state_dict_keys():
    model = TinyStack()
    keys = list(model.state_dict())
    compile_regions(model, find_regions(model), backend="inductor")
    compiled = [name for name, m in model.named_modules()
                if getattr(m, "_compiled_call_impl", None) is not None]
    assert compiled == ["blocks.0", "blocks.1", "blocks.2"]
    assert list(model.state_dict()) == keys  # in place: a checkpoint still loads
