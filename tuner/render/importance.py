"""``tuner show --importance`` for people and scripts: per batch size, how much each searched
parameter decided each objective (:mod:`tuner.data.importance`)."""

from __future__ import annotations

from typing import Any

from tuner.data.importance import (
    EVALUATOR,
    IMPORTANCE_OBJECTIVES,
    TOP_FRACTION,
    TOP_ROWS,
    BatchImportance,
    top_rows,
)
from tuner.data.json_contract import document
from tuner.render.table import wrap
from tuner.words import plural

HOW = ("(importance, by Optuna's PED-ANOVA: how differently a parameter's values are spread among\n"
       f" the best rows (the best {TOP_FRACTION * 100:.0f} %, at least {TOP_ROWS}, at most half rounded up) "
       "than among all of them;\n each column sums to 1; a parameter that applies to some rows only "
       "(mode, the options, dynamic)\n is judged among those rows)")


def render(found: list[BatchImportance], meta: dict[str, Any], width: int | None = None) -> str:
    """The text of ``tuner show --importance``, its sentences wrapped within ``width``
    characters (None: :func:`tuner.render.table.terminal_width`)."""
    lines = [f"study {meta.get('study')}: which parameters decide each objective, per batch size",
             HOW]
    if not found:
        lines.append("no trials recorded yet: there is nothing to rank")
    for b in found:
        lines.append("")
        if b.note is not None:
            lines.append(f"batch size {b.batch_size}: {b.note}")
            continue
        lines.append(f"batch size {b.batch_size}: {plural(b.rows, 'verified row')}, importance for "
                     f"being among the best {b.best_rows}")
        lines.append(table(b))
        lines += [f"  {objective}: {why}" for objective, why in b.skipped.items()]
        lines += [f"  {p}: {why}" for p, why in b.unjudged.items()]
        # The header's "best N" is of every row; these take the same share of their own rows.
        by_rows: dict[int, list[str]] = {}
        for p, n in b.judged_among.items():
            by_rows.setdefault(n, []).append(p)
        lines += [f"  {', '.join(ps)}: judged among the {n} rows "
                  f"{'they apply' if len(ps) > 1 else 'it applies'} to, the best {top_rows(n)} "
                  "of them" for n, ps in sorted(by_rows.items())]
    return "\n".join(line if "\n" in line else wrap(line, width) for line in lines)


def table(b: BatchImportance) -> str:
    """One row per parameter, most important first (for the first objective that has
    importances); one column per objective."""
    first = next(iter(b.importances.values()), {})
    params = sorted(b.parameters, key=lambda p: -first.get(p, 0.0))
    headers = ["parameter", *IMPORTANCE_OBJECTIVES]
    body = [[p, *(f"{b.importances[o][p]:.2f}" if p in b.importances.get(o, {}) else "-"
                  for o in IMPORTANCE_OBJECTIVES)] for p in params]
    widths = [max(len(r[i]) for r in [headers, *body]) for i in range(len(headers))]
    return "\n".join("  ".join(c.ljust(w) if i == 0 else c.rjust(w)
                               for i, (c, w) in enumerate(zip(r, widths)))
                     for r in [headers, *body])


def as_json(found: list[BatchImportance], meta: dict[str, Any],
            study: str | None = None) -> dict[str, Any]:
    """Under the JSON contract (:mod:`tuner.data.json_contract`); ``study``: the study's name
    where its files lack one."""
    return document({"study": meta.get("study") or study, "evaluator": EVALUATOR,
                     "objectives": dict(IMPORTANCE_OBJECTIVES),
                     "batch_sizes": [b.to_dict() for b in found]})
