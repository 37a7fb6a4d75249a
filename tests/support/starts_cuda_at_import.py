"""A factory module that, imported, looks as if it had started CUDA (on a box without a GPU):
a template process that imported it could fork no process able to use CUDA."""

import torch

torch.cuda.is_initialized = lambda: True  # what importing a module that touches CUDA leaves

from tests.support.models import tiny_cnn  # noqa: E402,F401 - the factory
