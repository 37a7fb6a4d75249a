"""The search space: bad choices are refused with a message, and every config it yields can run."""

from __future__ import annotations

import importlib.util

import pytest

from tuner.domain.space import (
    EAGER,
    INDUCTOR,
    SearchSpace,
    TrialConfig,
    build_space,
    installed_backends,
    installed_modes,
)
from tuner.errors import UserError

BACKENDS = ["eager", "inductor", "aot_eager", "cudagraphs"]
MODES = ["default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs"]


def space(device="cuda", batch_sizes=(1, 8), **kwargs) -> SearchSpace:
    """build_space against a fixed list of backends and modes, not the installed torch's."""
    return build_space(device=device, batch_sizes=list(batch_sizes), available_backends=BACKENDS,
                       available_modes=MODES, **kwargs)


def error(**kwargs) -> str:
    with pytest.raises(UserError) as exc:
        space(**kwargs)
    message = str(exc.value)
    assert "\n" not in message
    return message


# -- refused input ------------------------------------------------------------------------------

def test_unknown_backend_is_refused_with_what_torch_offers():
    message = error(backends=["warp_drive"])
    assert "unknown backend 'warp_drive'" in message
    assert "inductor" in message and "aot_eager" in message


def test_unknown_mode_is_refused_with_what_inductor_offers():
    message = error(backends=["inductor"], modes=["fastest"])
    assert "unknown mode 'fastest'" in message and "reduce-overhead" in message


def test_cudagraphs_backend_needs_cuda():
    assert "needs a CUDA device" in error(device="cpu", backends=["cudagraphs"])


@pytest.mark.parametrize("mode", ["reduce-overhead", "max-autotune"])
def test_cuda_graph_modes_need_cuda(mode):
    message = error(device="cpu", backends=["inductor"], modes=[mode])
    assert "needs a CUDA device" in message and "max-autotune-no-cudagraphs" in message


def test_mode_without_inductor_is_refused():
    message = error(backends=["eager", "aot_eager"], modes=["default"])
    assert "--mode applies to the inductor backend only" in message


@pytest.mark.parametrize("batch_sizes", [[0], [1, -4], [], [2.5], [True]])
def test_non_positive_or_non_integer_batch_sizes_are_refused(batch_sizes):
    assert "batch size" in error(batch_sizes=batch_sizes)


def test_the_same_choices_on_cuda_are_accepted():
    s = space(backends=["cudagraphs", "inductor"], modes=["reduce-overhead"])
    assert s.backends == ("eager", "cudagraphs", "inductor") and s.modes == ("reduce-overhead",)


# -- defaults -----------------------------------------------------------------------------------

def test_cpu_defaults_leave_out_cuda_only_choices_and_max_autotune():
    s = space(device="cpu")
    assert s.backends == ("eager", "inductor")
    assert s.modes == ("default",)
    assert s.dynamic == (False,)


def test_cuda_defaults_offer_cudagraphs_and_every_mode():
    s = space(device="cuda")
    assert s.backends == ("eager", "inductor", "cudagraphs")
    assert s.modes == tuple(MODES)


def test_eager_is_always_in_the_space_as_the_baseline():
    s = space(backends=["inductor"], modes=["default"])
    assert EAGER in s.backends
    assert {c.key for c in s.baselines()} <= {c.key for c in s.configs()}


def test_repeated_choices_are_kept_once():
    s = space(batch_sizes=(8, 1, 8), backends=["inductor", "inductor"], dynamic=[False, False])
    assert s.batch_sizes == (8, 1)
    assert s.backends == ("eager", "inductor")
    assert s.dynamic == (False,)


# -- configs and baselines ----------------------------------------------------------------------

def test_configs_never_yield_an_impossible_combination():
    s = space(backends=["eager", "inductor", "aot_eager", "cudagraphs"], modes=MODES,
              dynamic=[None, False, True])
    configs = s.configs()
    for c in configs:
        if c.backend == EAGER:
            assert c.mode is None and c.dynamic is None and c.compile_kwargs() == {}
        elif c.backend == INDUCTOR:
            assert c.mode in MODES
            assert c.compile_kwargs()["mode"] == c.mode
        else:
            assert c.mode is None and "mode" not in c.compile_kwargs()
        if c.compiled:
            assert c.dynamic in (None, False, True)
    # eager 1 + inductor 4 modes x 3 + aot_eager 3 + cudagraphs 3 = 19 per batch size
    assert len(configs) == 2 * 19
    assert len({c.key for c in configs}) == len(configs)


def test_baselines_are_eager_then_inductor_in_each_mode_default_first_at_every_batch_size():
    s = space(batch_sizes=(1, 8, 32), modes=["reduce-overhead", "default"], dynamic=[True, False])
    assert s.baselines() == [
        TrialConfig("eager", 1), TrialConfig("eager", 8), TrialConfig("eager", 32),
        TrialConfig("inductor", 1, "default", False), TrialConfig("inductor", 8, "default", False),
        TrialConfig("inductor", 32, "default", False),
        TrialConfig("inductor", 1, "reduce-overhead", False),
        TrialConfig("inductor", 8, "reduce-overhead", False),
        TrialConfig("inductor", 32, "reduce-overhead", False)]


def test_the_max_autotune_baselines_come_after_every_other_mode_s():
    # Their compile takes minutes: the cheap results first, whatever order the modes are given.
    s = space(batch_sizes=(1, 8), modes=["max-autotune", "reduce-overhead", "default",
                                         "max-autotune-no-cudagraphs"], dynamic=[False])
    assert [(c.mode, c.batch_size) for c in s.baselines() if c.backend == "inductor"] == [
        ("default", 1), ("default", 8), ("reduce-overhead", 1), ("reduce-overhead", 8),
        ("max-autotune", 1), ("max-autotune", 8), ("max-autotune-no-cudagraphs", 1),
        ("max-autotune-no-cudagraphs", 8)]


def test_baselines_without_inductor_are_eager_only():
    s = space(backends=["eager", "aot_eager"])
    assert s.baselines() == [TrialConfig("eager", 1), TrialConfig("eager", 8)]


def test_space_and_config_round_trip_through_dicts():
    s = space(dynamic=[None, True])
    assert SearchSpace.from_dict(s.to_dict()) == s
    for c in s.configs():
        assert TrialConfig.from_dict(c.to_dict()) == c


def test_labels_name_the_config_without_the_batch_size():
    assert TrialConfig("eager", 4).label == "eager"
    assert TrialConfig("inductor", 4, "reduce-overhead", False).label == "inductor:reduce-overhead"
    assert TrialConfig("inductor", 4, "default", None).label == "inductor:default dynamic=None"
    assert TrialConfig("aot_eager", 4, None, True).label == "aot_eager dynamic=True"


# -- the installed torch ------------------------------------------------------------------------

def test_installed_choices_come_from_torch():
    import torch._dynamo
    import torch._inductor

    backends, modes = installed_backends(), installed_modes()
    assert backends[0] == EAGER and INDUCTOR in backends
    registered = set(torch._dynamo.list_backends(exclude_tags=()))
    assert set(backends) - {EAGER} <= registered
    assert modes[0] == "default"
    assert set(modes) == set(torch._inductor.list_mode_options()) | {"default"}
    # Defaults on the CPU are a subset of what this torch offers.
    s = build_space(device="cpu", batch_sizes=[1])
    assert set(s.backends) <= set(backends) and set(s.modes) <= set(modes)


def test_a_backend_whose_package_is_missing_is_refused_and_not_offered(monkeypatch):
    from tuner.domain import space as space_module

    # tvm, as dynamo registers it on any machine, with its package certainly missing.
    monkeypatch.setitem(space_module.BACKEND_PACKAGES, "tvm", ("no_such_module_here", "apache-tvm"))
    with pytest.raises(UserError) as exc:
        build_space(device="cpu", batch_sizes=[1], backends=["tvm"],
                    available_backends=[*BACKENDS, "tvm"], available_modes=MODES)
    assert "backend 'tvm' needs a package" in str(exc.value)
    assert "pip install apache-tvm" in str(exc.value) and "inductor" in str(exc.value)
    assert "tvm" not in installed_backends()
    if importlib.util.find_spec("torch_tensorrt") is None:  # registered by that package itself
        assert "pip install torch-tensorrt" in error(backends=["tensorrt"])
    # Backends that need nothing beyond torch stay offered.
    assert {"inductor", "aot_eager"} <= set(installed_backends())


def test_a_batch_size_is_at_most_the_int32_range():
    from tuner.domain.space import MAX_BATCH_SIZE

    assert MAX_BATCH_SIZE == 2**31 - 1 and space(batch_sizes=[MAX_BATCH_SIZE]).batch_sizes == (
        MAX_BATCH_SIZE,)
    assert f"batch size {2**31} is more than" in error(batch_sizes=[1, 2**31])
