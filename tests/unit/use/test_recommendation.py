"""What a notebook or a REPL shows of a tuner.Recommendation: a one-line repr, and a small
HTML table."""

from __future__ import annotations

import pytest

from tests.support.synthetic import configs, write_study
from tuner.use.recommend import recommend

pytestmark = pytest.mark.filterwarnings("ignore::tuner.use.environment.MismatchWarning")


@pytest.fixture
def rec(tmp_path):
    study = write_study(tmp_path, "repr<study>", trial_configs=configs(
        (8,), ("eager", "inductor:default", "inductor:reduce-overhead")))
    return recommend(study, batch_size=8)


def test_the_repr_is_one_short_line(rec):
    text = repr(rec)
    assert text == (f"Recommendation(study='repr<study>', batch_size=8, "
                    f"config='reduce-overhead', p50_ms={rec.measured.latency_ms_p50:.3f})")
    assert rec.name == "reduce-overhead" and "\n" not in text and len(text) < 120
    assert str(rec) == text


def test_the_html_is_a_small_table_with_the_gain_over_plain(rec):
    html = rec._repr_html_()
    assert html.startswith("<table>") and html.endswith("</table>")
    assert html.count("<tr>") == 9
    assert "<th style=\"text-align:left\">vs plain</th>" in html
    assert "<td style=\"text-align:left\">repr&lt;study&gt;</td>" in html  # escaped
    assert f"{rec.measured.latency_ms_p50:.3f} ms" in html
