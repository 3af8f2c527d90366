"""The app with a link model (issue 26 item 4): contacts drawn with their transfer progress,
the energy and bytes/aborted plots, the link inputs.

WHY: a map line or a plot that renders but shows the wrong numbers would mislead a user
about what the contacts carried. These tests check the data behind each drawing against
what the model reports (``model.csv`` columns, the per-agent records, the link plan's
transfers), without a browser.
"""

from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np
import pytest

from mobidfl.analysis.app import (
    NOTHING_SENT,
    AppModel,
    EnergyPlot,
    LinkPlot,
    contact_pairs,
    contacts_geojson,
    energy_figure,
    energy_per_kind,
    initial_settings,
    legend_html,
    link_figure,
    link_on,
    link_progress,
    link_text,
    model_params,
    progress_labels,
    status_text,
)
from mobidfl.analysis.app.look import ABORTED_DASH, NOTHING_SENT_COLOUR, PROGRESS_COLOURS
from mobidfl.model.learning.results import StepResult

# 8 Cached-DFL cars and 6 D-PSGD pedestrians on a small grid; 2,064-byte messages (1,000
# bf16 parameters + 64 B) over a 0.2 Mbit/s link: most pairs finish, some are cut.
SMALL = {
    "map": "grid:5x5", "vehicles": 8, "pedestrians": 6, "sensors": 0, "uavs": 0,
    "test_size": 60, "local_steps": 1, "seed": 4, "link.model": "fixed_rate",
    "link.fixed_rate.rate_bps": 2e5, "link.params": 1000, "link.dtype": "bf16",
}


@pytest.fixture(scope="module")
def linked() -> AppModel:
    model = AppModel(**SMALL)
    assert model.app_error is None, model.app_error
    model.step()
    model.step()
    return model


def _fake(transfers: dict[str, list[float]] | None, n: int = 5) -> SimpleNamespace:
    """A model stand-in with just what :func:`link_progress` reads."""
    step = StepResult(
        step=1, trained=np.zeros(n, bool), train_loss=np.zeros(n),
        transfers=None if transfers is None else {k: np.asarray(v) for k, v in transfers.items()},
    )
    return SimpleNamespace(n_agents=n, last_step=step)


def test_link_progress_sums_both_directions_per_pair_and_classifies() -> None:
    # Prepare: pair (0, 1) swapped 2 x 1000 B, all arrived; pair (1, 3): 1000 B from 3
    # arrived, 600 B from 1 cut (1000 of 1600 B: 62.5 %); pair (2, 4): 500 B sent, none
    # arrived; pair (0, 2): in range, nothing sent.
    model = _fake({
        "sender": [0, 1, 3, 1, 4],
        "receiver": [1, 0, 1, 3, 2],
        "bytes_sent": [1000.0, 1000.0, 1000.0, 600.0, 500.0],
        "bytes_received": [1000.0, 1000.0, 1000.0, 0.0, 0.0],
        "aborted": [0, 0, 0, 1, 1],
    })
    pairs = np.array([[0, 1], [3, 1], [2, 4], [0, 2]])  # either order

    # Execute
    out = link_progress(model, pairs)

    # Assert
    np.testing.assert_array_equal(out["bytes_sent"], [2000.0, 1600.0, 500.0, 0.0])
    np.testing.assert_array_equal(out["bytes_received"], [2000.0, 1000.0, 0.0, 0.0])
    np.testing.assert_array_equal(out["aborted"], [0, 1, 1, 0])
    np.testing.assert_allclose(out["fraction"][:3], [1.0, 0.625, 0.0])
    assert math.isnan(out["fraction"][3])
    np.testing.assert_array_equal(out["progress"], [4, 2, 0, NOTHING_SENT])
    assert progress_labels()[4] == "all arrived" and progress_labels()[2] == "50%-75% arrived"


def test_link_progress_is_none_without_link_accounting() -> None:
    assert link_progress(_fake(None), np.array([[0, 1]])) is None
    assert link_progress(SimpleNamespace(n_agents=2, last_step=None), np.array([[0, 1]])) is None
    empty = link_progress(_fake({c: [] for c in ("sender", "receiver", "bytes_sent",
                                                 "bytes_received", "aborted")}),
                          np.array([[0, 1]]))
    assert empty["progress"].tolist() == [NOTHING_SENT] and empty["bytes_sent"].tolist() == [0]


def test_contacts_are_drawn_once_each_by_progress_with_the_step_bytes(linked: AppModel) -> None:
    # Prepare: this step's contact pairs and what the link plan says they carried; the
    # plan's transfers add up to its per-agent tally (mobidfl.model.links.LinkPlan.transfers).
    step, n = linked.last_step, linked.n_agents
    for column, by in (("bytes_sent", "sender"), ("bytes_received", "receiver")):
        np.testing.assert_allclose(
            np.bincount(step.transfers[by], weights=step.transfers[column], minlength=n),
            step.link[column])
    np.testing.assert_array_equal(
        np.bincount(step.transfers["sender"], weights=step.transfers["aborted"], minlength=n),
        step.link["transfers_aborted"])
    pairs = contact_pairs(linked.adjacency)
    progress = link_progress(linked, pairs)
    columns = linked.datacollector.model_vars
    assert len(set(progress["progress"].tolist())) >= 2, "scenario should mix classes"

    # Execute
    features = contacts_geojson(linked)["features"]

    # Assert: every pair drawn once, in the feature of its class; the bytes per feature add
    # up to the step's model.csv columns (every transfer is over a contact pair).
    assert sum(f["properties"]["lines"] for f in features) == len(pairs)
    assert sum(len(f["geometry"]["coordinates"]) for f in features) == len(pairs)
    assert all(f["properties"]["total"] == len(pairs) for f in features)
    for feature in features:
        p = feature["properties"]
        chosen = (progress["progress"] == p["progress"]) & ((progress["aborted"] > 0)
                                                              == p["aborted"])
        assert p["lines"] == chosen.sum() > 0
        assert p["bytes_sent"] == pytest.approx(progress["bytes_sent"][chosen].sum())
        colour = NOTHING_SENT_COLOUR if p["progress"] == NOTHING_SENT \
            else PROGRESS_COLOURS[p["progress"]]
        assert p["style"]["color"] == colour
        assert (p["style"].get("dashArray") == ABORTED_DASH) == p["aborted"]
    sent = sum(f["properties"]["bytes_sent"] for f in features)
    got = sum(f["properties"]["bytes_received"] for f in features)
    assert sent == pytest.approx(columns["bytes_sent"][-1]) and sent > 0
    assert got == pytest.approx(columns["bytes_received"][-1])
    aborted = sum(f["properties"]["lines"] for f in features if f["properties"]["aborted"])
    assert 0 < aborted <= columns["transfers_aborted"][-1]
    # the legend keys the classes; the status line gives the step's totals
    legend = legend_html(linked, features[0]["properties"])
    assert all(label in legend for label in progress_labels().values())
    text = link_text(linked)
    assert text == (
        f"link fixed_rate (0.2 Mbit/s): {columns['bytes_sent'][-1] / 1e6:.2f} MB sent, "
        f"{columns['bytes_received'][-1] / 1e6:.2f} MB arrived, "
        f"{int(columns['transfers_aborted'][-1])} aborted"
    )
    assert text in status_text(linked)


def _line(figure, gid: str) -> tuple[np.ndarray, np.ndarray]:
    for ax in figure.axes:
        for line in ax.get_lines():
            if line.get_gid() == gid:
                return np.asarray(line.get_xdata(), float), np.asarray(line.get_ydata(), float)
    raise AssertionError(f"no line {gid}")


def test_energy_figure_plots_energy_per_step_its_split_and_per_kind(linked: AppModel) -> None:
    # Prepare: the per-agent records give the expected cumulative mean per kind; an extra
    # ``energy_radio_j`` column (another branch's split) must be picked up.
    columns = linked.datacollector.model_vars
    agents = linked.agent_table()
    expected = agents.groupby(["kind", "step"])["energy_j"].mean()
    columns["energy_radio_j"] = [0.0, 1.5, 2.5]
    try:
        # Execute
        figure = energy_figure(linked)
    finally:
        del columns["energy_radio_j"]

    # Assert
    steps, total = _line(figure, "energy-total")
    np.testing.assert_array_equal(steps, [0, 1, 2])
    np.testing.assert_allclose(total, columns["energy_j"])
    assert total[1:].min() > 0
    np.testing.assert_allclose(_line(figure, "energy-radio")[1], [0.0, 1.5, 2.5])
    for kind in ("vehicle", "pedestrian"):
        steps, mean = _line(figure, f"energy-kind-{kind}")
        np.testing.assert_allclose(mean, expected[kind].loc[steps].to_numpy())
        assert np.all(np.diff(mean) >= 0)  # cumulative
    assert set(energy_per_kind(linked)) == {"vehicle", "pedestrian"}


def test_link_figure_plots_megabytes_and_aborted_transfers(linked: AppModel) -> None:
    # Execute
    figure = link_figure(linked)

    # Assert: MB per step as model.csv says, one bar per step of transfers_aborted.
    columns = linked.datacollector.model_vars
    np.testing.assert_allclose(_line(figure, "link-sent")[1],
                               np.asarray(columns["bytes_sent"]) / 1e6)
    np.testing.assert_allclose(_line(figure, "link-received")[1],
                               np.asarray(columns["bytes_received"]) / 1e6)
    bars = {p.get_gid(): p.get_height() for ax in figure.axes for p in ax.patches
            if (p.get_gid() or "").startswith("link-aborted-")}
    assert bars == {f"link-aborted-{s}": v for s, v in enumerate(columns["transfers_aborted"])}
    assert max(bars.values()) > 0


def test_ideal_link_keeps_the_plain_contacts_and_hides_the_link_plots() -> None:
    # Prepare: the same world without a link model.
    model = AppModel(**{**SMALL, "link.model": "ideal"})
    model.step()

    # Execute
    features = contacts_geojson(model)["features"]

    # Assert: one plain layer as before; no link plots, no link text.
    assert len(features) == 1 and "progress" not in features[0]["properties"]
    assert not link_on(model) and link_text(model) == ""
    assert not EnergyPlot.shown(model) and not LinkPlot.shown(model)
    text = energy_figure(model).axes[0].texts[0].get_text()
    assert text == 'link = "ideal": no link accounting'


def test_link_inputs_choose_the_model_and_profile() -> None:
    # Prepare: the app's inputs, a link chosen from them.
    from mobidfl.model.links import PROFILES

    params = model_params({"vehicles": 4, "pedestrians": 2, "sensors": 0, "uavs": 0,
                           "learning": False})
    assert params["link.model"]["value"] == "ideal"
    assert {"ideal", "fixed_rate", "distance_rate"} <= set(params["link.model"]["values"])
    assert params["link.profile"]["values"] == list(PROFILES)
    settings = {**initial_settings(params), "link.model": "distance_rate",
                "link.profile": "cv2x"}

    # Execute
    model = AppModel(**settings)
    env = model_params({"link.model": "fixed_rate", "link.rate_bps": 3e6})

    # Assert: the model runs the chosen link; a setting under an old name (link.rate_bps)
    # fills its input, named by the public name
    assert model.app_error is None
    assert (model.link.options.model, model.link.options.profile) == ("distance_rate", "cv2x")
    assert env["link.model"]["value"] == "fixed_rate" and "link" not in env
    assert env["link.fixed_rate.rate_bps"]["value"] == 3e6 and "link.rate_bps" not in env
