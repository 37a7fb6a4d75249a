"""The README and docs/: the README stays a front door, its tour runs as written, and every
relative link leads somewhere."""

from __future__ import annotations

import re
import shlex
import warnings
from pathlib import Path

import pytest
from click.testing import CliRunner

from tests.support import ROOT
from tuner.cli.app import main

README = ROOT / "README.md"
PAGES = [README, *sorted((ROOT / "docs").glob("*.md"))]
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")


def prose(text: str) -> str:
    """The text outside fenced code blocks (a '#' or '[x](y)' in a code block is code)."""
    return "\n".join(part for i, part in enumerate(re.split(r"^ *```.*$", text, flags=re.M))
                     if i % 2 == 0)


def links(page: Path) -> list[str]:
    return [t for t in LINK.findall(prose(page.read_text()))
            if not re.match(r"[a-z]+:", t)]  # http:, https:, mailto: are not files here


def slug(heading: str) -> str:
    """The anchor GitHub gives a heading: lower case, punctuation dropped, spaces as hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def anchors(page: Path) -> set[str]:
    return {slug(h) for h in re.findall(r"^#+ +(.+)$", prose(page.read_text()), flags=re.M)}


def test_the_readme_is_a_front_door_of_at_most_200_lines():
    assert README.read_text().count("\n") <= 200


def test_every_docs_page_says_first_what_it_answers():
    for page in PAGES[1:]:
        title, blank, answers = page.read_text().splitlines()[:3]
        assert title.startswith("# ") and blank == "" and answers.endswith("?"), page.name


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_every_relative_link_points_to_a_file_that_exists(page):
    missing = [t for t in links(page) if t.split("#")[0]
               and not (page.parent / t.split("#")[0]).exists()]
    assert missing == []


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_every_link_to_a_heading_names_one_that_is_there(page):
    wrong = []
    for target in links(page):
        path, _, anchor = target.partition("#")
        file = page.parent / path if path else page
        if anchor and file.suffix == ".md" and file.exists() and anchor not in anchors(file):
            wrong.append(target)
    assert wrong == []


def tour() -> str:
    text = README.read_text()
    start = text.index("## A five-minute tour on the GPU")
    return text[start:text.index("\n## ", start + 1)]


def blocks(text: str, language: str) -> list[str]:
    """The fenced code blocks of that language ("" for none), in order."""
    found, current, open_as = [], [], None
    for line in text.splitlines():
        if line.startswith("```"):
            if open_as is None:
                open_as, current = line[3:].strip(), []
                continue
            if open_as == language:
                found.append("\n".join(current) + "\n")
            open_as = None
        elif open_as is not None:
            current.append(line)
    return found


def test_the_tours_commands_and_code_run_as_written(tmp_path, fake_cli, monkeypatch):
    """The README's tour on the fake runner: its search (on the GPU the fake pretends to have,
    a few trials), then each of its show and recommend commands and its production code, on the
    study that search made."""
    import torch

    commands = [shlex.split(line.split("#")[0]) for block in blocks(tour(), "sh")
                for line in block.splitlines() if line.startswith("tuner ")]
    assert [c[1] for c in commands][:1] == ["search"] and len(commands) >= 5
    studies = f"{tmp_path}/"
    runner = CliRunner()
    for command in commands:
        args = [a.replace("studies/", studies) for a in command[1:]]
        if command[1] == "search":
            args += ["--device", "cuda", "--studies-dir", str(tmp_path), "--trials", "4"]
        out = runner.invoke(main, args)
        if "--max-p99-ms" in args and out.exit_code == 1:
            # The fake's p99s are over the tour's 2 ms: "the error names the closest config
            # and the limit it breaks".
            assert out.output.startswith("Error: ") and "p99" in out.output, out.output
            continue
        assert out.exit_code == 0, (command, out.output)
    assert (tmp_path / "resnet18-cuda" / "trials.parquet").exists()

    (code,) = blocks(tour(), "python")
    monkeypatch.setattr(torch.backends.cudnn, "benchmark", torch.backends.cudnn.benchmark)
    scope = {"model": torch.nn.Linear(4, 2).eval()}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # measured on the fake GPU, applied on this CPU
        exec(code.replace("studies/", studies), scope)
    assert scope["rec"].config.compiled and scope["model"]._orig_mod is not None


def test_the_tours_excerpt_of_show_is_the_real_output():
    (excerpt,) = [b for b in blocks(tour(), "") if "Pareto-optimal configs" in b]
    out = CliRunner().invoke(main, ["show", str(ROOT / "studies" / "h200-resnet18")])
    assert out.exit_code == 0, out.output
    rest = iter(out.output.splitlines())  # some of the output's lines, in its order
    assert all(line in rest for line in excerpt.splitlines()), excerpt


def test_the_commands_on_the_committed_studies_run():
    """The tour's "No GPU at hand?" commands, on the studies committed under studies/."""
    paragraph = tour()[tour().index("No GPU at hand?"):]
    commands = [shlex.split(c) for c in re.findall(r"`(tuner [^`]+)`", " ".join(paragraph.split()))]
    assert [c[1] for c in commands] == ["show", "recommend", "compare"]
    for command in commands:
        args = [str(ROOT / a) if a.startswith("studies/") else a for a in command[1:]]
        out = CliRunner().invoke(main, args)
        assert out.exit_code == 0, (command, out.output)
