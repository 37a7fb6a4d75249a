"""A study from elsewhere is read, never run: compile artifacts are code (torch unpickles them
when it loads them), and reading a study (show, compare, recommend, search --start-from, in the
CLI and in Python) must not load them. Each finalist's artifacts file here is a pickle that would
write a marker file the moment anything unpickled it."""

from __future__ import annotations

import pickle
import warnings

import tuner
from tests.support.cli import OTHER, STUDY, invoke, search_args, two_studies


def hostile(marker) -> bytes:
    """Bytes that write ``marker`` when unpickled."""
    return pickle.dumps(_Writer(str(marker)))


class _Writer:
    """Unpickled, it writes the file ``path``: what a hostile artifacts file could do."""

    def __init__(self, path: str) -> None:
        self.path = path

    def __reduce__(self):
        import pathlib

        return (pathlib.Path.write_text, (pathlib.Path(self.path), "ran"))


def test_reading_a_study_never_loads_its_artifacts(fake_cli, tmp_path):
    root = two_studies(tmp_path / "studies")
    marker = tmp_path / "marker"
    planted = []
    for study in (STUDY, OTHER):
        for folder in ("artifacts", "references"):
            (root / study / folder).mkdir(exist_ok=True)
        for saved in (root / study / "artifacts").glob("*.bin"):
            saved.write_bytes(hostile(marker))
            planted.append(saved)
        (root / study / "references" / "bs1-float32-0.pt").write_bytes(hostile(marker))
    assert planted  # the finalists named their artifacts files, now hostile
    pickle.loads(hostile(tmp_path / "proof"))  # they do run code when unpickled
    assert (tmp_path / "proof").read_text() == "ran"
    study = str(root / STUDY)
    for args in (["show", study], ["show", study, "--all", "--json"], ["show", study, "--importance"],
                 ["compare", study, str(root / OTHER)],
                 ["recommend", study, "--batch-size", "1"],
                 ["recommend", study, "--batch-size", "8", "--format", "python"],
                 ["recommend", study, "--batch-size", "1", "--json"],
                 search_args(root, "--start-from", study, name="started", confirm="0")):
        result = invoke(*args)
        assert result.exit_code == 0, (args, result.stderr)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", tuner.MismatchWarning)
        rec = tuner.recommend(study, batch_size=1)
    assert rec.artifacts_found and rec.describe() and rec.snippet()
    tuner.compare([study, str(root / OTHER)])
    assert not marker.exists()
