"""What the tests share: fakes of the user's side (model factories, studies, a CLI run in this
process, worker processes) and the repository's root. No test module imports another."""

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]  # the repository: README.md, studies/, tuner/
