"""Why a recommendation is eager, in a sentence: compiling did not pay, the limits ruled out every
compiled config, or none finished and matched eager."""

from __future__ import annotations

import pandas as pd

from tuner.data.noise import UNDECIDED, p50s_of, row_verdict
from tuner.data.rows import NAME
from tuner.data.select import Constraints, best, failed_again, left_out_counts, rank
from tuner.domain.config import EAGER
from tuner.words import plural


def why_eager(chosen: pd.Series, df: pd.DataFrame, candidates: pd.DataFrame,
               feasible: pd.DataFrame, constraints: Constraints, objective: str,
               unmeasured: int = 0) -> str:
    """Why an eager ``chosen`` won at its batch size: compiling did not pay off (a compiled
    config met the limits), the limits ruled out every compiled config, or no compiled config
    finished and matched eager. ``df`` holds the batch sizes the choice was made among: one,
    or every one for throughput without a batch size, where the best compiled config may be of
    another batch size than ``chosen``. ``unmeasured``: the compiled configs of the study's
    space with no row yet."""
    def compiled_at(rows: pd.DataFrame) -> pd.DataFrame:
        return rows[rows["backend"] != EAGER]

    one_size = df["batch_size"].nunique() <= 1

    if not compiled_at(feasible).empty:
        # The choice without the limits: a compiled config they ruled out, where it is one.
        unlimited = best(candidates, objective)
        if unlimited["backend"] != EAGER and not feasible["trial_number"].isin(
                [unlimited["trial_number"]]).any():
            broken = " and ".join(s for _, _, s in constraints.violations(unlimited))
            size = "" if one_size else f" at batch size {int(unlimited['batch_size'])}"
            return (f"eager was best within the limits: {unlimited[NAME]}{size} (trial "
                    f"{int(unlimited['trial_number'])}) does better, but {broken}")
        if objective in ("latency", "throughput"):
            top = rank(compiled_at(feasible), objective).iloc[0]
            if row_verdict(chosen, top).outcome == UNDECIDED and min(
                    len(p50s_of(chosen)), len(p50s_of(top))) >= 2:
                return (f"eager was fastest here by its median, but undecided against "
                        f"{top[NAME]}: too few processes to say so beyond noise")
        return {"warmup": "eager was best here: it compiles nothing, so it warms up first",
                "memory": "eager was best here: no compiled config needs less memory"}.get(
                    objective, "eager was best here: compiling does not pay off")
    if not (ok := compiled_at(candidates)).empty:
        row = rank(ok, objective).iloc[0]
        broken = " and ".join(s for _, _, s in constraints.violations(row))
        size = "" if one_size else f" at batch size {int(row['batch_size'])}"
        return (f"eager is the only config within the limits: the best compiled one, "
                f"{row[NAME]}{size} (trial {int(row['trial_number'])}), {broken}")
    tried = compiled_at(df)
    if tried.empty:
        left = (f" yet: {plural(unmeasured, 'compiled config')} of its search space "
                f"{'has' if unmeasured == 1 else 'have'} no trial (the search, still running or "
                "resumed, measures them)" if unmeasured else "")
        return ("the study measured no compiled config at this batch size" if one_size
                else "the study measured no compiled config") + left
    # A finalist that a fresh process failed finished and matched eager in the search.
    held = " and held up when measured again" if failed_again(tried).any() else ""
    return f"no compiled config finished, matched eager{held} ({why_none(tried)})" if held \
        else f"no compiled config finished and matched eager ({why_none(tried)})"


def why_none(df: pd.DataFrame) -> str:
    """Why none of ``df`` (none of them eligible) can be recommended, counted as ``tuner show``
    counts them: ``1 compile_error, 2 no latency measured``."""
    return left_out_counts(df) if not df.empty else "the study has no trials"
