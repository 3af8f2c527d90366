"""The answer as a regime map.

Which policy wins where, as a function of measured world properties, with a decision rule drawn on
some worlds and checked on others.

Input: a bench folder (``leaderboard.csv``, ``descriptors.csv``, ``manifest.json``), e.g. of
``mobidfl bench --study mobility_skew``. Per column, the winner is the policy with the best
mean final accuracy (central FedAvg, the oracle, left out) and its margin over the runner-up;
the *contenders* are the policies no other one beats after Holm
(:mod:`mobidfl.analysis.bench_stats`).

The rule (:func:`fit_rule`) is the simplest one that can state an answer in measured terms:
one threshold on contacts per step and one on the label-skew index split the plane into four
regimes, each predicting its most frequent winner. Thresholds are searched over midpoints of
the training columns' values, maximising the training hit rate (ties: the fewest distinct
predictions, then the smallest thresholds). It is drawn on the study's columns only; the
``heldout:`` columns are scored after (:func:`score_rule`). A hit is counted two ways: the
predicted policy *is* the column's winner, or it is among its contenders (not beaten).
"""

from __future__ import annotations

import itertools
import json
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from mobidfl.analysis.measures import descriptor_named, map_descriptors
from mobidfl.analysis.study import HELDOUT_PREFIX

__all__ = ["AXES", "Rule", "answer", "column_outcomes", "fit_rule", "load_rule", "regime_figure",
           "rule_json", "score_rule", "write_regime_map"]

RULE_SUFFIX = ".rule.json"
"""A study's published rule ships beside it as ``<study>.rule.json``."""
X = "neighbours_per_step"
Y = "label_skew"
AXES = tuple(d.name for d in map_descriptors((X, Y)))
"""The descriptors ``regime_map.csv`` carries per column: the two cut, then every ``on_map``
one of :data:`mobidfl.analysis.measures.DESCRIPTORS`."""
REFERENCE = "central_fedavg"


@dataclass(frozen=True)
class Rule:
    """Four regimes, each with the policy it predicts.

    Contacts per step below / above ``x_cut`` x label skew below / above ``y_cut``;
    ``predict[(x_high, y_high)]`` is each regime's policy.
    """

    x_cut: float
    y_cut: float
    predict: dict[str, str]  # keys "lo,lo", "lo,hi", "hi,lo", "hi,hi" (contacts, skew)
    train_hits: int
    train_n: int

    def regime(self, x: float, y: float) -> str:
        """The regime of ``(x, y)``: ``hi``/``lo`` against each cut, e.g. ``"hi,lo"``."""
        return f"{'hi' if x > self.x_cut else 'lo'},{'hi' if y > self.y_cut else 'lo'}"

    def __call__(self, x: float, y: float) -> str:
        """The policy predicted at ``(x, y)``.

        Empty where the rule predicts none, and where a descriptor was not measured (NaN: a
        world whose mobility follows the learning has none without training).
        """
        if not (np.isfinite(x) and np.isfinite(y)):
            return ""
        return self.predict.get(self.regime(x, y), "")

    def text(self) -> str:
        """The rule in words.

        Where each policy is predicted, the most frequent one last as "elsewhere".
        """
        words = {"lo": "at most", "hi": "above"}
        where: dict[str, list[str]] = {}
        for key in ("lo,lo", "lo,hi", "hi,lo", "hi,hi"):
            if key in self.predict:
                where.setdefault(self.predict[key], []).append(key)
        if len(where) == 1:
            return f"**{next(iter(where))}** everywhere"
        ordered = sorted(where, key=lambda p: (len(where[p]), p))
        clauses = []
        for policy in ordered[:-1]:
            parts = []
            for key in where[policy]:
                cx, cy = key.split(",")
                parts.append(f"contacts per agent per step {words[cx]} {self.x_cut:.2f} and "
                             f"label skew {words[cy]} {self.y_cut:.2f}")
            clauses.append(f"**{policy}** where " + ", or ".join(parts))
        return "; ".join(clauses) + f"; **{ordered[-1]}** elsewhere"


def load_rule(path: str | Path) -> Rule:
    """A rule from a ``regime_rule.json`` or a shipped study's name.

    Written by :func:`write_regime_map` or ``python -m mobidfl.analysis.publish --page``, or the
    rule published with a shipped study; a file that is not one is one :class:`ConfigError`.
    """
    from mobidfl.analysis.study import PACKAGE, study_names
    from mobidfl.errors import ConfigError

    if str(path) in study_names():  # the rule published with a shipped study
        shipped = resources.files(PACKAGE).joinpath(f"{path}{RULE_SUFFIX}")
        if not shipped.is_file():
            raise ConfigError("--rule", str(path), "a study with a published rule, or a "
                              "regime_rule.json file")
        path = str(shipped)
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        why = f"{type(exc).__name__}: {' '.join(str(exc).split())}"[:160]
        raise ConfigError("--rule", str(path), f"a regime_rule.json written by MobiDFL ({why})"
                          ) from None
    try:
        return _checked_rule(data)
    except ValueError as exc:
        raise ConfigError("--rule", str(path), f"a regime_rule.json written by MobiDFL ({exc})"
                          ) from None


PREDICT_KEYS = ("lo,lo", "lo,hi", "hi,lo", "hi,hi")
"""The regimes a :class:`Rule` predicts for (contacts, skew against their cuts)."""


def _checked_rule(data: Any) -> Rule:
    """The :class:`Rule` of a parsed ``regime_rule.json``; ValueError saying what is wrong.

    Cuts finite, regimes among :data:`PREDICT_KEYS`, each predicting a registered policy, hit
    counts whole numbers with ``0 <= hits <= n``.
    """
    from mobidfl.analysis.values import finite_number, registered_policy

    if not isinstance(data, dict):
        raise ValueError(f"a JSON {type(data).__name__}, not an object")
    if "schema" in data:
        raise ValueError(f"schema {data['schema']!r}: this reader takes the unversioned rule "
                         "(schema 3 is the pre-registered study's, read by --describe --rule)")
    rule = data.get("rule")
    if not isinstance(rule, dict):
        raise ValueError("no 'rule' object")
    x_cut = finite_number(rule.get("x_cut"), "rule.x_cut")
    y_cut = finite_number(rule.get("y_cut"), "rule.y_cut")
    predict = rule.get("predict")
    if not isinstance(predict, dict) or not predict:
        raise ValueError("rule.predict is not an object of regimes")
    for key, policy in predict.items():
        if key not in PREDICT_KEYS:
            raise ValueError(f"rule.predict has the regime {key!r} (allowed: "
                             + ", ".join(PREDICT_KEYS) + ")")
        registered_policy(policy, f"rule.predict[{key!r}]")
    counts = {}
    for name in ("train_hits", "train_n"):
        value = rule.get(name)
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise ValueError(f"rule.{name} = {value!r} is not a whole number >= 0")
        counts[name] = value
    if counts["train_hits"] > counts["train_n"]:
        raise ValueError(f"rule.train_hits = {counts['train_hits']} > rule.train_n = "
                         f"{counts['train_n']}")
    return Rule(x_cut=x_cut, y_cut=y_cut, predict=dict(predict), **counts)


def column_outcomes(board: pd.DataFrame, descriptors: pd.DataFrame) -> pd.DataFrame:
    """One row per column.

    Its descriptors, winner, margin over the runner-up (accuracy points x 100) and contenders
    (``;``-joined), and whether it is held out.
    """
    rows = []
    ok = board[(board["status"] == "ok") & (board["policy"] != REFERENCE)]
    for column, group in ok.groupby("column", sort=False):
        ranked = group.sort_values("final_acc", ascending=False)
        if ranked.empty:
            continue
        winner = str(ranked["policy"].iloc[0])
        margin = float(ranked["final_acc"].iloc[0] - ranked["final_acc"].iloc[1]) * 100 \
            if len(ranked) > 1 else float("nan")
        contenders = sorted(map(str, group.loc[group["contender"].astype(bool), "policy"]))
        variant = str(group["variant"].iloc[0])
        rows.append({"column": column, "variant": variant,
                     "heldout": variant.startswith(HELDOUT_PREFIX), "winner": winner,
                     "margin_pp": margin, "contenders": ";".join(contenders)})
    out = pd.DataFrame(rows)
    if out.empty:
        return out
    keep = ["column", *AXES]
    return out.merge(descriptors[[c for c in keep if c in descriptors]], on="column",
                     how="left")


def _hits(rule: Rule, frame: pd.DataFrame) -> tuple[int, int]:
    predicted = [rule(x, y) for x, y in zip(frame[X], frame[Y], strict=True)]
    exact = sum(p == w for p, w in zip(predicted, frame["winner"], strict=True))
    level = sum(p in c.split(";") for p, c in zip(predicted, frame["contenders"], strict=True))
    return exact, level


def _cuts(values: np.ndarray) -> list[float]:
    v = np.unique(values[np.isfinite(values)])
    return [float(a + b) / 2 for a, b in itertools.pairwise(v)] or [float(v[0]) if v.size
                                                                     else 0.0]


def fit_rule(train: pd.DataFrame) -> Rule:
    """The two-threshold rule with the most exact hits on ``train`` (module docstring)."""
    best: tuple[Any, ...] | None = None
    for x_cut, y_cut in itertools.product(_cuts(train[X].to_numpy(float)),
                                          _cuts(train[Y].to_numpy(float))):
        regimes: dict[str, Counter] = {}
        for x, y, winner in zip(train[X], train[Y], train["winner"], strict=True):
            key = f"{'hi' if x > x_cut else 'lo'},{'hi' if y > y_cut else 'lo'}"
            regimes.setdefault(key, Counter())[winner] += 1
        predict = {k: sorted(c.items(), key=lambda kv: (-kv[1], kv[0]))[0][0]
                   for k, c in regimes.items()}
        rule = Rule(x_cut=x_cut, y_cut=y_cut, predict=predict, train_hits=0,
                    train_n=len(train))
        exact, _ = _hits(rule, train)
        key = (-exact, len(set(predict.values())), x_cut, y_cut)
        if best is None or key < best[0]:
            best = (key, rule, exact)
    assert best is not None, "no training column"
    _, rule, exact = best
    return Rule(x_cut=rule.x_cut, y_cut=rule.y_cut, predict=rule.predict, train_hits=exact,
                train_n=len(train))


def score_rule(rule: Rule, test: pd.DataFrame) -> dict[str, Any]:
    """Hit counts of ``rule`` on ``test`` (exact winner, and among the contenders).

    Only worlds whose two descriptors were measured count; ``unmeasured`` says how many
    were left out.
    """
    measured = np.isfinite(test[X].astype(float)) & np.isfinite(test[Y].astype(float))
    left_out = int((~measured).sum())
    test = test[measured]
    exact, level = _hits(rule, test)
    return {"n": len(test), "unmeasured": left_out, "exact": exact, "contender": level,
            "exact_rate": exact / len(test) if len(test) else float("nan"),
            "contender_rate": level / len(test) if len(test) else float("nan")}


def regime_figure(outcomes: pd.DataFrame, rule: Rule, path: Path) -> Path:
    """Winner per column over contacts per step (log) x label skew.

    Marker area ~ margin; held-out columns hollow; the rule's thresholds as dashed lines.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from mobidfl.atomic import write_figure

    fig, ax = plt.subplots(figsize=(7.5, 5))
    policies = sorted(outcomes["winner"].unique())
    colours = dict(zip(policies, plt.cm.tab10(np.linspace(0, 1, 10)), strict=False))
    for _, row in outcomes.iterrows():
        size = 30 + 12 * min(abs(row["margin_pp"]) if np.isfinite(row["margin_pp"]) else 0, 20)
        colour = colours[row["winner"]]
        ax.scatter(max(row[X], 1e-2), row[Y], s=size,
                   facecolors="none" if row["heldout"] else colour, edgecolors=colour,
                   linewidths=1.5)
    for policy in policies:
        ax.scatter([], [], color=colours[policy], label=policy)
    ax.scatter([], [], facecolors="none", edgecolors="grey", label="held out")
    ax.axvline(rule.x_cut, ls="--", c="grey")
    ax.axhline(rule.y_cut, ls="--", c="grey")
    ax.set_xscale("log")
    ax.set_xlabel(f"{descriptor_named(X).words} (measured)")
    ax.set_ylabel("label-skew index (mean TV distance)")
    ax.set_title("winning policy (area ~ margin over the runner-up)")
    ax.legend(fontsize=8, loc="best")
    fig.tight_layout()
    write_figure(fig, path, dpi=120)
    plt.close(fig)
    return path


def answer(board: pd.DataFrame, descriptors: pd.DataFrame) -> dict[str, Any]:
    """Outcomes per column, the rule drawn on the non-held-out columns, and its scores.

    Each outcome with the rule's prediction; scores on the non-held-out columns (``train``) and on
    the held-out ones (``heldout``).
    """
    outcomes = column_outcomes(board, descriptors)
    train, test = outcomes[~outcomes["heldout"]], outcomes[outcomes["heldout"]]
    rule = fit_rule(train)
    outcomes["predicted"] = [rule(x, y) for x, y in zip(outcomes[X], outcomes[Y], strict=True)]
    return {"outcomes": outcomes, "rule": rule, "train": score_rule(rule, train),
            "heldout": score_rule(rule, test)}


def rule_json(got: dict[str, Any]) -> str:
    """The rule and its scores as JSON text (what ``regime_rule.json`` holds)."""
    return json.dumps({"rule": asdict(got["rule"]), "text": got["rule"].text(),
                       "train": got["train"], "heldout": got["heldout"]}, indent=1) + "\n"


def write_regime_map(folder: str | Path, out: str | Path | None = None) -> dict[str, Any]:
    """Fit the regime rule on a bench ``folder`` and score it on its held-out columns.

    The rule is fit on the non-held-out columns; ``regime_map.csv``, ``regime_rule.json`` and
    ``regime_map.png`` are written to ``out`` (default: the folder). Returns the rule and its
    scores.
    """
    from mobidfl.atomic import write_csv, write_text_atomic

    folder = Path(folder)
    out = Path(out) if out is not None else folder
    out.mkdir(parents=True, exist_ok=True)
    got = answer(pd.read_csv(folder / "leaderboard.csv"), pd.read_csv(folder / "descriptors.csv"))
    write_csv(got["outcomes"], out / "regime_map.csv", index=False)
    text = rule_json(got)
    write_text_atomic(out / "regime_rule.json", text)
    regime_figure(got["outcomes"], got["rule"], out / "regime_map.png")
    return json.loads(text)


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m mobidfl.analysis.regime_map BENCH_FOLDER [OUT]``."""
    import sys

    args = list(sys.argv[1:] if argv is None else argv)
    if not 1 <= len(args) <= 2:
        print("usage: python -m mobidfl.analysis.regime_map BENCH_FOLDER [OUT]", file=sys.stderr)
        return 2
    result = write_regime_map(*args)
    print(result["text"])
    print(f"held out: {result['heldout']['exact']} of {result['heldout']['n']} exact, "
          f"{result['heldout']['contender']} of {result['heldout']['n']} not beaten")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
