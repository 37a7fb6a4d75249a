"""The fake command line answers what torch offers from the test process's findings
(tuner.fake.runner.offered), as the installed torch would."""

from __future__ import annotations

import pytest

from tuner.domain import inductor_options, space, workload
from tuner.domain.space import CUDA_DEFAULT_OPTIONS
from tuner.fake import runner as fakes


@pytest.fixture
def real():
    """What the installed torch offers, asked of torch itself."""
    modes = space.installed_modes()
    return {"models": workload.torchvision_models(), "backends": space.installed_backends(),
            "modes": modes,
            "defaults": inductor_options.installed_defaults(modes, list(CUDA_DEFAULT_OPTIONS))}


def test_the_fake_answers_what_torch_offers_as_torch_does(real, monkeypatch):
    monkeypatch.setenv(fakes.FAKE_OFFERED_ENV, fakes.offered())
    fakes.install(setattr=monkeypatch.setattr)

    assert workload.torchvision_models() == real["models"]
    assert space.installed_backends() == real["backends"]
    assert space.installed_modes() == real["modes"]
    answered = inductor_options.installed_defaults(real["modes"], list(CUDA_DEFAULT_OPTIONS))
    assert answered == real["defaults"]
    assert answered.of_mode("reduce-overhead")  # the mode's options are there, not only {}


def test_without_the_findings_the_fake_asks_torch(monkeypatch):
    monkeypatch.delenv(fakes.FAKE_OFFERED_ENV, raising=False)
    asked = workload.torchvision_models
    fakes.install(setattr=monkeypatch.setattr)
    assert workload.torchvision_models is asked
