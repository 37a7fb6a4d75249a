"""A factory module that reads the command line when imported, as a training script does: the
tuner's own arguments are not its own, so argparse exits."""

from __future__ import annotations

import argparse

from tests.support.models import tiny_cnn

parser = argparse.ArgumentParser()
parser.add_argument("--lr", type=float)
args = parser.parse_args()

factory = tiny_cnn
