"""Where a study keeps a config's compile artifacts (tuner.domain.layout)."""

from __future__ import annotations

from tuner.domain import layout


def test_a_short_key_names_its_artifacts_file_as_before():
    assert layout.artifacts_relative("inductor|reduce-overhead|dynamic=False|bs=1") == \
        "artifacts/inductor_reduce-overhead_dynamic_False_bs_1.bin"


def test_a_key_of_many_options_names_a_file_the_file_system_takes_and_no_other_key_shares(
        tmp_path):
    options = "|".join(f"opt.some_inductor_option_{i}=False" for i in range(12))
    one, two = (layout.artifacts_relative(f"inductor|reduce-overhead|bs={bs}|{options}")
                for bs in (1, 2))
    assert one != two and one.startswith("artifacts/inductor_reduce-overhead_bs_1")
    # Written as the study writes it: through a temporary name about 15 bytes longer.
    name = one.removeprefix("artifacts/")
    (tmp_path / f".{name}.abcdefgh.tmp").write_bytes(b"")
    (tmp_path / name).write_bytes(b"")
