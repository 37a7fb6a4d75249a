"""Starting a search from other studies (``tuner search --start-from STUDY``): what another
study found worth measuring, measured here first.

From each study given, read from its Parquet files alone (never its compile artifacts, never a
pickle: another host's study is data, not code), the configs of its finalists and of its Pareto
fronts: per batch size in its order of merit (the finalists measured again by their rank within
noise, then by median p50; then the rest of the front by p50), the batch sizes taken in turn,
each's best first, as the search spreads its trials. A config counts where one of this space
ran the same thing (:mod:`tuner.data.equivalent`: compile, precision, memory format, inductor
options at the values its mode runs without them), whatever dimensions either study searched,
on whatever GPU or torch it was measured. Those outside this space, and those at batch sizes
this search does not measure, are named once each and skipped; one that is a baseline here is
measured as the baseline. The rest (:class:`StartFrom`) are stored with the study when it is
made (:func:`tuner.study.storage.resume.check_start_from`) and queued behind the baselines on
every run that finds them unmeasured (:func:`queue_started`), each trial marked with the study
it came from (``started_from``).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Container, Sequence
from importlib import metadata
from pathlib import Path
from typing import Any

import pandas as pd

from tuner.data import files
from tuner.data.derive import listed
from tuner.data.equivalent import Ran, mode_options
from tuner.data.rows import NAME
from tuner.data.select import LATENCY, eligible, pareto
from tuner.domain.config import TrialConfig
from tuner.domain.layout import TRIALS_FILE, StudyLayout
from tuner.domain.space import SearchSpace
from tuner.domain.workload import Workload
from tuner.errors import UserError
from tuner.study.baselines import give_up, queue_baselines, waiting_trials
from tuner.study.claims import Claims
from tuner.study.probe import Probes
from tuner.study.spec import StudySpec
from tuner.study.start_plan import Started, StartFrom
from tuner.study.storage import STARTED_FROM_ATTR
from tuner.words import plural

OPTION = "--start-from"


def read_start_from(given: Sequence[str], studies_dir: Path, name: str, workload: Workload,
                    space: SearchSpace) -> StartFrom:
    """The configs the studies ``given`` (folders, trials files or names under
    ``studies_dir``) put first in this study (``name``, of ``workload`` over ``space``); a
    study that cannot be read, of another model, this study itself or given twice is a
    :class:`UserError`."""
    sources: list[tuple[str, pd.DataFrame, dict[str, Any]]] = []
    for text in given:
        path = _source_path(text, studies_dir)
        own = StudyLayout.of(studies_dir, name)
        if path.resolve() in (own.directory.resolve(), own.trials_file.resolve()):
            raise UserError(f"{OPTION} {text} is this study ({name}): start from another "
                            "study, or leave it out", about=OPTION)
        try:
            df, meta, file = files.load(path)
        except UserError as exc:
            raise UserError(f"{OPTION} {text}: {exc}", about=OPTION) from None
        source = str(meta.get("study") or file.parent.name)
        model = (meta.get("workload") or {}).get("model") or next(iter(df["model"].dropna()), None)
        if model != workload.model:
            raise UserError(f"{OPTION} {text} is a study of {model}, and this search is of "
                            f"{workload.model}: start from a study of the same model",
                            about=OPTION)
        if source in [s for s, _, _ in sources]:
            raise UserError(f"{OPTION} names study {source!r} twice: give each study once",
                            about=OPTION)
        sources.append((source, df, meta))
    here = _space_by_ran(workload, space)
    baselines = {config.key for config in space.baselines()}
    seen = set(baselines)
    configs: list[Started] = []
    notes: list[str] = []
    for source, df, meta in sources:
        picked, said = _from_one(source, df, meta, here, space, (seen, baselines))
        configs += picked
        notes += said
    return StartFrom(tuple(s for s, _, _ in sources), tuple(configs), tuple(notes))


def _source_path(text: str, studies_dir: Path) -> Path:
    """A study folder or trials file, or a study name under ``studies_dir``."""
    if not text.strip():
        raise UserError(f"{OPTION} is empty: give a study folder or a study name under "
                        f"{studies_dir}", about=OPTION)
    path = files.check_path(Path(text))
    if not path.exists() and (studies_dir / text).exists():
        return studies_dir / text
    if not path.exists():
        raise UserError(f"{OPTION} {text}: no such study (give a study folder, its "
                        f"{TRIALS_FILE}, or a study name under {studies_dir})",
                        about=OPTION)
    return path


def _from_one(source: str, df: pd.DataFrame, meta: dict[str, Any],
              here: dict[str, TrialConfig], space: SearchSpace,
              keys: tuple[set[str], set[str]]) -> tuple[list[Started], list[str]]:
    """One study's configs to measure first and the lines that say what of it was taken and
    what skipped. ``keys``: the configs taken already (which those taken here join), and the
    baselines among them."""
    seen, baselines = keys
    ran = Ran(meta)
    merit = order_of_merit(df)
    per_size: dict[int, list[TrialConfig]] = {bs: [] for bs in space.batch_sizes}
    outside: dict[str, list[int]] = {}  # config name -> batch sizes
    elsewhere: dict[int, int] = {}  # batch size not searched here -> its configs
    for _, row in merit.iterrows():
        bs = int(row["batch_size"])
        if bs not in per_size:
            elsewhere[bs] = elsewhere.get(bs, 0) + 1
            continue
        config = here.get(ran.key(row))
        if config is None:
            outside.setdefault(str(row[NAME]), []).append(bs)
        else:
            per_size[bs].append(config)
    picked: list[Started] = []
    for config in _in_turn(list(per_size.values())):
        if config.key not in seen:
            seen.add(config.key)
            picked.append(Started(config, source))
    fingerprints = list(meta.get("fingerprints") or files.fingerprints(df))
    also = len({c.key for configs in per_size.values() for c in configs} & baselines)
    notes = [f"{OPTION} {source} (measured on {_machines(fingerprints)}): "
             f"{plural(len(picked), 'config')} of its finalists and Pareto fronts "
             f"{'is' if len(picked) == 1 else 'are'} measured first, after the baselines"
             + (f" ({also} more {'is a baseline' if also == 1 else 'are baselines'} here)"
                if also else "")]
    if (torch := _torch_note(source, fingerprints)) is not None:
        notes.append(torch)
    if elsewhere:
        sizes = sorted(elsewhere)
        notes.append(f"{OPTION} {source}: {'batch size' if len(sizes) == 1 else 'batch sizes'} "
                     f"{', '.join(map(str, sizes))} {'is' if len(sizes) == 1 else 'are'} not "
                     f"searched here: {plural(sum(elsewhere.values()), 'config')} there skipped")
    if outside:
        named = "; ".join(f"{name} (bs {', '.join(map(str, sizes))})"
                          for name, sizes in outside.items())
        count = sum(len(sizes) for sizes in outside.values())
        notes.append(f"{OPTION} {source}: {plural(count, 'config')} outside this search's "
                     f"space, skipped: {named}")
    return picked, notes


def order_of_merit(df: pd.DataFrame) -> pd.DataFrame:
    """A study's finalists and Pareto-optimal rows, per batch size in its order of merit: the
    finalists ranked within noise (``rank_within_noise``), then those measured again that left
    the front, then the rest of the front, each by median p50 (:data:`LATENCY`)."""
    ok = eligible(df)
    again = ok["latency_ms_p50_repeats"].map(lambda v: listed(v) >= 2).astype(bool)
    front = ok["trial_number"].isin(set(pareto(df)["trial_number"]))
    rows = ok[again | front]
    rank = pd.to_numeric(rows["rank_within_noise"], errors="coerce")
    tier = rank.isna().astype(int) + (~again[rows.index]).astype(int)
    ordered = rows.assign(_tier=tier, _rank=rank.fillna(0),
                          _latency=pd.to_numeric(rows[LATENCY], errors="coerce"))
    ordered = ordered.sort_values(["batch_size", "_tier", "_rank", "_latency", "trial_number"],
                                  kind="stable")
    return ordered.drop(columns=["_tier", "_rank", "_latency"])


def _in_turn(lists: list[list[TrialConfig]]) -> list[TrialConfig]:
    """The first of each list, then the second of each, ...: each batch size's best first."""
    longest = max((len(items) for items in lists), default=0)
    return [items[i] for i in range(longest) for items in lists if i < len(items)]


def _space_by_ran(workload: Workload, space: SearchSpace) -> dict[str, TrialConfig]:
    """This space's configs by the key of what each runs (:class:`tuner.data.equivalent.Ran`),
    read as this study's files will be."""
    meta: dict[str, Any] = {"space": space.to_dict(), "workload": workload.to_dict()}
    if space.options:
        meta["mode_options"] = mode_options(space.modes)
    ran = Ran(meta)
    out: dict[str, TrialConfig] = {}
    for config in space.configs():
        applied = config.applied_to(workload)
        row = {"config_json": json.dumps(config.to_dict()), "dtype": applied.dtype,
               "channels_last": applied.channels_last,
               "cudnn_benchmark": applied.cudnn_benchmark}
        out.setdefault(ran.key(row), config)
    return out


def _machines(fingerprints: list[dict[str, Any]]) -> str:
    """Where a study was measured, in a few words: its GPUs, else CPU."""
    names = [str(fp.get("gpu_name")) if fp.get("device_kind") == "cuda" and fp.get("gpu_name")
             else "CPU" for fp in fingerprints]
    return ", ".join(dict.fromkeys(names)) or "an unknown machine"


def _torch_note(source: str, fingerprints: list[dict[str, Any]]) -> str | None:
    """One line where the study was measured with another torch than this search runs."""
    theirs = sorted({str(fp["torch"]) for fp in fingerprints if fp.get("torch")})
    try:
        ours = metadata.version("torch")
    except metadata.PackageNotFoundError:
        return None
    if not theirs or ours in theirs:
        return None
    return (f"{OPTION} {source}: measured with torch {', '.join(theirs)}, and this search runs "
            f"torch {ours}: its order of merit may not hold here")


def queue_first(claims: Claims, spec: StudySpec, stored: dict[str, Any] | None,
                say: Callable[[str], None], broken: Container[int] | None = None) -> None:
    """Queue what a run of ``spec`` measures first: the baselines
    (:func:`tuner.study.baselines.queue_baselines`), then the configs of the studies it starts
    from (``stored``, the study's :class:`StartFrom` as a dict; None: none), but none that waits
    for a max-autotune probe (:mod:`tuner.study.probe`). Their notes are said where the run
    asked for them (a search with --start-from, not a worker). ``broken``: the batch sizes
    where the model fails in eager, to queue nothing at; None: those the study holds (none with
    --retry-failed). A run calls it again once a probe's compile fits the budget
    (:class:`tuner.study.probing.Probing`)."""
    state = claims.state()
    held = broken if broken is not None else {} if spec.retry_failed else state.broken
    probes = Probes.read(claims.fronts, spec.space, spec.protocol.compile_timeout_s, held)
    behind = queue_baselines(claims, state, probes.baselines(spec.space), held)
    if stored is not None:
        queue_started(claims, StartFrom.from_dict(stored), behind, (held, probes.held),
                      say if spec.start_from is not None else lambda text: None)


def queue_started(claims: Claims, plan: StartFrom, behind: bool,
                  skip: tuple[Container[int], Callable[[TrialConfig], bool]],
                  say: Callable[[str], None]) -> None:
    """Queue the ``plan``'s configs that no trial holds, in order, behind the baselines, each
    marked with the study it came from, and say the plan's notes. ``behind``: a baseline was
    queued anew on this run, after the plan's configs that still wait: those give up their
    places and are queued again behind it (as :mod:`tuner.study.baselines` does for
    baselines). ``skip``: the batch sizes not to queue at (broken), and which configs wait
    for a probe."""
    for note in plan.notes:
        say(note)
    if not plan.configs:
        return
    state = claims.state()
    held, waits = skip
    waiting = waiting_trials(claims) if behind else {}
    for started in plan.configs:
        config = started.config
        if config.batch_size in held or waits(config):
            continue  # the run would only prune it
        queued = waiting.get(config.key, [])
        if queued:
            if not all([give_up(claims, stored) for stored in queued]):
                continue  # another worker started it meanwhile
        elif state.taken(config.key):
            continue
        claims.enqueue(config, **{STARTED_FROM_ATTR: started.source})
