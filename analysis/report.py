"""Figures and tables of a run or a sweep, in the seed papers' style (importable from notebooks).

``make_report(DIR)`` reads a ``mobidfl run`` folder (``model.csv`` + ``config.toml``) or a
``mobidfl sweep`` folder (``manifest.csv`` + ``runs/*.parquet``) and writes, each only when
its columns and swept parameters are present:

* ``accuracy.png``: test accuracy over steps per policy (or per grid point), mean with a
  band of ± one standard deviation over seeds (de Heredia 2024 Figs. 5-8, Cached-DFL Fig. 3);
* ``final_accuracy_vs_p.png``: final accuracy vs the high-mobility proportion p
  (``hm_fraction``; de Heredia 2024, Tables 1-4);
* ``hm_lm_gap_vs_p.png``: HM - LM accuracy gap vs p (de Heredia 2024, Table 2);
* ``cache_vs_tau_max.png``: mean cached-model count and age vs tau_max (columns
  ``cache_size_mean``, ``cache_age_mean``, averaged over steps 1..T; Cached-DFL, Table 2);
* ``federations.png``: federation count over time (column ``federations``; PSFL, Fig. 5);
* ``ntc_nfc.png``: training cycles NTC and frustrated clients NFC per algorithm (final
  cumulative ``ntc``, ``nfc``; MoFeL, Figs. 4-5);
* ``report.md``: mean ± std over seeds of every final metric per grid point, the figures,
  and the runs that failed.

The data are one long frame (one row per run per step) with a ``run_id``, a ``seed`` and
the swept parameters as columns; every plotting function takes that frame and returns a
figure (or ``None`` when it does not apply), so notebooks can call them directly.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from itertools import product
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from mobidfl.analysis.stats import format_mean_std, mean_std
from mobidfl.analysis.sweep import MANIFEST, load_runs, read_manifest
from mobidfl.atomic import write_figure, write_text_atomic
from mobidfl.errors import ConfigError
from mobidfl.model.config import canonical_name, read_toml

ACC_LABEL = "test accuracy"
P_LABEL = "p (proportion of high-mobility clients)"
FINAL_METRICS = ("acc_mean", "acc_hm", "acc_lm", "hm_lm_gap", "consensus", "federations",
                 "ntc", "nfc")
STEP_MEAN_METRICS = ("cache_size_mean", "cache_age_mean")
STYLE = {
    "figure.dpi": 110,
    "axes.grid": True,
    "grid.alpha": 0.3,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "font.size": 9,
    "legend.fontsize": 8,
    "legend.frameon": False,
    "lines.linewidth": 1.6,
    "lines.markersize": 5,
}


# --- data -------------------------------------------------------------------------------------
def _swept(manifest: pd.DataFrame) -> dict[str, str]:
    """A sweep manifest's swept columns (its settings as written) -> their public names.

    So a figure finds its parameter under any of its names (``hm_fraction``,
    ``random_walk.hm_fraction``).
    """
    columns = list(manifest.columns)
    return {name: canonical_name(name)
            for name in columns[columns.index("seed") + 1 : columns.index("status")]}


def load_results(folder: str | Path) -> tuple[pd.DataFrame, list[str]]:
    """One row per run per step, and the swept parameter names (empty for a single run).

    Parameters
    ----------
    folder
        The output folder of ``mobidfl run`` (``model.csv``) or ``mobidfl sweep``
        (``manifest.csv``).

    Returns
    -------
    tuple[pandas.DataFrame, list[str]]
        The rows (``run_id``, ``point``, ``replicate``, ``seed``, ``policy``, then the
        ``model.csv`` columns) and the swept setting names.

    Raises
    ------
    ConfigError
        ``folder`` is neither kind of output folder.
    """
    folder = Path(folder)
    if (folder / MANIFEST).exists():
        public = _swept(read_manifest(folder))
        return load_runs(folder).rename(columns=public), list(public.values())
    if (folder / "model.csv").exists():
        table = _read_model_csv(folder / "model.csv")
        settings = _settings_of(folder / "config.toml")
        table.insert(0, "run_id", folder.name)
        table.insert(1, "point", 0)
        table.insert(2, "replicate", 0)
        table.insert(3, "seed", int(settings.get("seed", 0)))
        table.insert(4, "policy", str(settings.get("policy", "")))
        return table, []
    raise ConfigError(
        "report folder", str(folder), "a `mobidfl run` (model.csv) or `mobidfl sweep` "
        "(manifest.csv) output folder"
    )


def _read_model_csv(path: Path) -> pd.DataFrame:
    """``model.csv`` of a run; a damaged or foreign file is one :class:`ConfigError`."""
    allowed = "a model.csv written by `mobidfl run` (a CSV with a numeric step column)"
    try:
        table = pd.read_csv(path)
    except (ValueError, UnicodeDecodeError, pd.errors.ParserError, pd.errors.EmptyDataError):
        raise ConfigError("report file", str(path), f"{allowed}; this one is unreadable") from None
    if "step" not in table or not pd.api.types.is_numeric_dtype(table["step"]) or table.empty:
        raise ConfigError("report file", str(path), f"{allowed}; this one is not")
    return table


def _settings_of(path: Path) -> dict[str, Any]:
    if not path.exists():
        return {}
    return read_toml(path, source="report file")


def final_values(data: pd.DataFrame, column: str, *, keys: Sequence[str] = ()) -> pd.DataFrame:
    """Per run: the last non-missing value of ``column`` (with the run's ``keys``)."""
    rows = data.dropna(subset=[column]).sort_values("step")
    last = rows.groupby("run_id", sort=False).tail(1)
    return last[[*_present(last, ("seed", *keys)), "run_id", column]].reset_index(drop=True)


def step_means(
    data: pd.DataFrame, column: str, *, keys: Sequence[str] = (), first_step: int = 1
) -> pd.DataFrame:
    """Per run: the mean of ``column`` over steps >= ``first_step``.

    Step 0 is before any exchange, so caches are empty there.
    """
    rows = data[data["step"] >= first_step].dropna(subset=[column])
    by = ["run_id", *_present(rows, ("seed", *keys))]
    return rows.groupby(by, sort=False, dropna=False)[column].mean().reset_index()


def over_seeds(values: pd.DataFrame, column: str, keys: Sequence[str]) -> pd.DataFrame:
    """Mean, standard deviation (ddof=1; 0 for one seed) and count over seeds per key."""
    added = not keys
    if added:
        values, keys = values.assign(_one=0), ["_one"]
    grouped = values.groupby(list(keys), sort=True, dropna=False)[column]
    out = grouped.agg(mean="mean", std="std", n="count").reset_index()
    out["std"] = out["std"].fillna(0.0)
    return out.drop(columns=["_one"]) if added else out


def accuracy_curves(data: pd.DataFrame, swept: Sequence[str]) -> tuple[pd.DataFrame, list[str]]:
    """Accuracy per step, mean ± std over seeds, per policy and grid point.

    A run that mixes policies (``acc_policy_<name>`` columns) gets one curve per policy.
    """
    keys = list(swept)
    policy_cols = [c for c in data.columns if c.startswith("acc_policy_")]
    if "policy" not in keys and policy_cols:
        long = data.melt(
            id_vars=["run_id", "seed", "step", *keys], value_vars=policy_cols,
            var_name="policy", value_name="acc",
        )
        long["policy"] = long["policy"].str.removeprefix("acc_policy_")
        keys = [*keys, "policy"]
    elif "acc_mean" in data:
        long = data[["run_id", "seed", "step", *keys]].assign(acc=data["acc_mean"])
        if "policy" in data and "policy" not in keys and data["policy"].nunique() == 1:
            keys = [*keys, "policy"]
            long["policy"] = data["policy"]
    else:
        return pd.DataFrame(), keys
    long = long.dropna(subset=["acc"])
    return over_seeds(long, "acc", [*keys, "step"]), keys


# --- figures ----------------------------------------------------------------------------------
def accuracy_figure(data: pd.DataFrame, swept: Sequence[str]):
    """Accuracy over steps: one line per policy (per facet of the other swept parameters)."""
    curves, keys = accuracy_curves(data, swept)
    if curves.empty:
        return None
    facet_keys = [k for k in keys if k != "policy"] if "policy" in keys else []
    line_keys = ["policy"] if "policy" in keys else keys
    facets = _combos(curves, facet_keys)
    if len(facets) > 12:  # too many panels: all lines in one
        facets, line_keys = [{}], keys
    with plt.rc_context(STYLE):
        columns = min(len(facets), 3)
        rows = math.ceil(len(facets) / columns)
        fig, axes = plt.subplots(
            rows, columns, figsize=(4.2 * columns, 3.2 * rows), squeeze=False, sharey=True
        )
        for ax, facet in zip(axes.flat, facets, strict=False):
            part = _select(curves, facet)
            for line in _combos(part, line_keys):
                curve = _select(part, line).sort_values("step")
                label = _label(line) or "all agents"
                (drawn,) = ax.plot(curve["step"], curve["mean"], label=label)
                if (curve["n"] > 1).any():
                    ax.fill_between(
                        curve["step"], curve["mean"] - curve["std"], curve["mean"] + curve["std"],
                        color=drawn.get_color(), alpha=0.18, linewidth=0,
                    )
            ax.set_title(_label(facet), fontsize=9)
            ax.set_xlabel("step (global epoch)")
            ax.legend(loc="lower right")
        for ax in axes.flat[len(facets):]:
            ax.set_visible(False)
        for ax in axes[:, 0]:
            ax.set_ylabel(ACC_LABEL)
        seeds = int(curves["n"].max())
        band = f"; band: ± 1 std over {seeds} seeds" if seeds > 1 else ""
        fig.suptitle(f"Accuracy over time (mean{band})")
        fig.tight_layout()
    return fig


def metric_vs_parameter(
    data: pd.DataFrame,
    swept: Sequence[str],
    *,
    parameter: str,
    columns: Sequence[str],
    labels: Sequence[str],
    xlabel: str,
    title: str,
    reduce: str = "final",
):
    """Final (or step-mean) ``columns`` vs a swept ``parameter``, error bars over seeds.

    One line per combination of the other swept parameters.
    """
    present = [c for c in columns if c in data and data[c].notna().any()]
    if parameter not in swept or data[parameter].nunique() < 2 or len(present) != len(columns):
        return None
    others = [k for k in swept if k != parameter]
    with plt.rc_context(STYLE):
        fig, axes = plt.subplots(1, len(columns), figsize=(4.4 * len(columns), 3.3),
                                 squeeze=False)
        for ax, column, label in zip(axes.flat, columns, labels, strict=True):
            pick = final_values if reduce == "final" else step_means
            values = pick(data, column, keys=swept)
            stats = over_seeds(values, column, [*others, parameter])
            for line in _combos(stats, others):
                part = _select(stats, line).sort_values(parameter)
                ax.errorbar(
                    part[parameter], part["mean"], yerr=part["std"], marker="o", capsize=3,
                    label=_label(line) or None,
                )
            ax.set_xlabel(xlabel)
            ax.set_ylabel(label)
            if others:
                ax.legend()
        fig.suptitle(title)
        fig.tight_layout()
    return fig


def final_accuracy_vs_p(data: pd.DataFrame, swept: Sequence[str]):
    """Figure: final mean accuracy against ``hm_fraction`` (mean ± std over seeds)."""
    return metric_vs_parameter(
        data, swept, parameter="random_walk.hm_fraction", columns=["acc_mean"],
        labels=["final " + ACC_LABEL],
        xlabel=P_LABEL, title="Final accuracy vs p (mean ± std over seeds)",
    )


def hm_lm_gap_vs_p(data: pd.DataFrame, swept: Sequence[str]):
    """Figure: high- minus low-mobility accuracy against ``hm_fraction``."""
    return metric_vs_parameter(
        data, swept, parameter="random_walk.hm_fraction", columns=["hm_lm_gap"],
        labels=["accuracy HM − LM"], xlabel=P_LABEL,
        title="High- minus low-mobility accuracy vs p",
    )


def cache_vs_tau_max(data: pd.DataFrame, swept: Sequence[str]):
    """Figure: cached models per agent and their mean age against ``tau_max``."""
    return metric_vs_parameter(
        data, swept, parameter="cached.tau_max", columns=list(STEP_MEAN_METRICS),
        labels=["cached models per agent", "mean age of cached models (steps)"],
        xlabel="τ_max (staleness tolerance, steps)", reduce="mean",
        title="Cache count and age vs τ_max (mean over steps; ± std over seeds)",
    )


def federations_figure(data: pd.DataFrame, swept: Sequence[str]):
    """Federation count per step, one line per grid point, band over seeds."""
    if "federations" not in data or not data["federations"].notna().any():
        return None
    rows = data.dropna(subset=["federations"])
    curves = over_seeds(rows, "federations", [*swept, "step"])
    with plt.rc_context(STYLE):
        fig, ax = plt.subplots(figsize=(5.2, 3.4))
        for line in _combos(curves, swept):
            curve = _select(curves, line).sort_values("step")
            (drawn,) = ax.plot(curve["step"], curve["mean"], label=_label(line) or None)
            if (curve["n"] > 1).any():
                ax.fill_between(curve["step"], curve["mean"] - curve["std"],
                                curve["mean"] + curve["std"], color=drawn.get_color(),
                                alpha=0.18, linewidth=0)
        ax.set_xlabel("step (global epoch)")
        ax.set_ylabel("number of federations |F|")
        if swept:
            ax.legend()
        ax.set_title("Federation count over time")
        fig.tight_layout()
    return fig


def ntc_nfc_figure(data: pd.DataFrame, swept: Sequence[str]):
    """Final NTC and NFC per algorithm (policy), bars with ± std over seeds."""
    columns = [c for c in ("ntc", "nfc") if c in data and data[c].notna().any()]
    if not columns:
        return None
    titles = {"ntc": "NTC (training cycles)", "nfc": "NFC (frustrated clients)"}
    with plt.rc_context(STYLE):
        fig, axes = plt.subplots(1, len(columns), figsize=(4.4 * len(columns), 3.3),
                                 squeeze=False)
        for ax, column in zip(axes.flat, columns, strict=True):
            stats = over_seeds(final_values(data, column, keys=swept), column, swept)
            names = [_label(c) or "run" for c in _combos(stats, swept)]
            ax.bar(range(len(stats)), stats["mean"], yerr=stats["std"], capsize=3,
                   color=[f"C{i % 10}" for i in range(len(stats))])
            ax.set_xticks(range(len(stats)), names, rotation=20, ha="right")
            ax.set_ylabel(titles[column])
        fig.suptitle("MoFeL metrics per algorithm (final, mean ± std over seeds)")
        fig.tight_layout()
    return fig


FIGURES = {
    "accuracy.png": accuracy_figure,
    "final_accuracy_vs_p.png": final_accuracy_vs_p,
    "hm_lm_gap_vs_p.png": hm_lm_gap_vs_p,
    "cache_vs_tau_max.png": cache_vs_tau_max,
    "federations.png": federations_figure,
    "ntc_nfc.png": ntc_nfc_figure,
}


# --- tables -----------------------------------------------------------------------------------
def summary_table(data: pd.DataFrame, swept: Sequence[str]) -> pd.DataFrame:
    """Per grid point: number of seeds and ``mean ± std`` over seeds of every metric present."""
    keys = list(swept) or ["_all"]
    data = data.assign(_all=0) if not swept else data
    table = data.groupby(keys, sort=True, dropna=False)["run_id"].nunique()
    table = table.rename("seeds").reset_index()
    for column in [*FINAL_METRICS, *STEP_MEAN_METRICS]:
        if column not in data or not data[column].notna().any():
            continue
        pick = step_means if column in STEP_MEAN_METRICS else final_values
        stats = over_seeds(pick(data, column, keys=keys), column, keys)
        stats[column] = [
            _pm(m, s, n) for m, s, n in zip(stats["mean"], stats["std"], stats["n"], strict=True)
        ]
        table = table.merge(stats[[*keys, column]], on=keys, how="left")
    return table.fillna("–").drop(columns=["_all"], errors="ignore")


def _pm(mean: float, std: float, n: int) -> str:
    if pd.isna(mean):
        return "–"
    digits = 1 if abs(mean) >= 100 else 3 if abs(mean) < 10 else 2
    return format_mean_std(mean, std, n, digits=digits)


def markdown_table(table: pd.DataFrame) -> str:
    """``table`` as a Markdown pipe table, as the reports and pages print one."""
    head = "| " + " | ".join(str(c) for c in table.columns) + " |"
    rule = "|" + "---|" * len(table.columns)
    body = ["| " + " | ".join(_cell(v) for v in row) + " |" for row in table.itertuples(False)]
    return "\n".join([head, rule, *body])


def _cell(value: Any) -> str:
    return str(value).replace("|", "/")


# --- the report -------------------------------------------------------------------------------
def make_report(folder: str | Path, *, out: str | Path | None = None) -> list[Path]:
    """Write every applicable figure and ``report.md`` to ``out`` (default ``folder/report``).

    Parameters
    ----------
    folder
        The output folder of ``mobidfl run`` or ``mobidfl sweep``.
    out
        Where to write; created if missing.

    Returns
    -------
    list[pathlib.Path]
        The files written (figures, then ``report.md``).

    Raises
    ------
    ConfigError
        ``folder`` is neither kind of output folder.
    """
    folder = Path(folder)
    out = Path(out) if out is not None else folder / "report"
    data, swept = load_results(folder)
    out.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    figures = {} if data.empty else {name: make(data, swept) for name, make in FIGURES.items()}
    for name, fig in figures.items():
        if fig is None:
            continue
        write_figure(fig, out / name, dpi=130, bbox_inches="tight")
        plt.close(fig)
        written.append(out / name)
    lines = [f"# MobiDFL report: {folder.name}", ""]
    if (folder / MANIFEST).exists():
        manifest = read_manifest(folder)
        manifest = manifest.rename(columns=_swept(manifest))
        counts = manifest["status"].value_counts()
        seeds = sorted(manifest["seed"].unique())
        lines += [
            f"Sweep over {', '.join(f'`{k}`' for k in swept) or 'no parameter'}; "
            f"seeds {', '.join(str(s) for s in seeds)}; "
            + ", ".join(f"{counts.get(s, 0)} {s}" for s in ("ok", "error", "lost", "pending"))
            + " runs.",
            "",
        ]
    else:
        settings = _settings_of(folder / "config.toml")
        data_set = (f"; data set `{settings['dataset']}`" if settings.get("learning", True)
                    and "dataset" in settings else "")
        lines += [f"Single run (seed {int(data['seed'].iloc[0])}{data_set}).", ""]
    table = summary_table(data, swept) if not data.empty else pd.DataFrame()
    if not table.empty:
        lines += [
            "## Final values (mean ± std over seeds)",
            "",
            "Accuracy, gap, consensus, federations, NTC and NFC at the last step; cache count "
            "and age averaged over steps 1..T.",
            "",
            markdown_table(table),
            "",
        ]
    if (folder / MANIFEST).exists():
        wall = manifest[manifest["status"] == "ok"]["wall_s"]
        if len(wall):
            lines += [f"Wall time per run: {mean_std(wall, digits=1)} s.", ""]
        failed = manifest[manifest["status"].isin(["error", "lost"])]
        if len(failed):
            shown = failed[["run_id", "seed", *swept, "status", "error"]]
            lines += ["## Failed runs", "", markdown_table(shown), ""]
    if written:
        lines += ["## Figures", ""]
        lines += [f"![{p.stem}]({p.name})" for p in written]
        lines.append("")
    write_text_atomic(out / "report.md", "\n".join(lines))
    written.append(out / "report.md")
    return written


# --- helpers ----------------------------------------------------------------------------------
def _present(frame: pd.DataFrame, names: Sequence[str]) -> list[str]:
    return [n for n in names if n in frame.columns]


def _combos(frame: pd.DataFrame, keys: Sequence[str]) -> list[dict[str, Any]]:
    """The distinct combinations of ``keys`` present in ``frame``, sorted."""
    if not keys:
        return [{}]
    values = [sorted(frame[k].dropna().unique().tolist()) for k in keys]
    seen = set(map(tuple, frame[list(keys)].itertuples(index=False)))
    return [dict(zip(keys, c, strict=True)) for c in product(*values) if tuple(c) in seen]


def _select(frame: pd.DataFrame, where: dict[str, Any]) -> pd.DataFrame:
    mask = np.ones(len(frame), bool)
    for key, value in where.items():
        mask &= (frame[key] == value).to_numpy()
    return frame[mask]


def _label(where: dict[str, Any]) -> str:
    return ", ".join(f"{k}={v}" if k != "policy" else str(v) for k, v in where.items())
