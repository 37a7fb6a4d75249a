"""Output as a person reads it, whatever the width: sentences wrap to the terminal
(tuner.render.table), so a test that looks for a sentence looks in the text with its line
breaks and indents made single spaces."""


def flat(text: str) -> str:
    """``text`` with every run of spaces and line breaks one space."""
    return " ".join(text.split())
