"""Contact traces in and out (issue 26, item 6).

The strong test: a map run's exported contacts (MobiDFL CSV and Parquet, The ONE's
connection events, a CRAWDAD-style table), replayed as a trace with the same seed and
policy, give the same contacts, bytes and accuracies as the map run. The readers are
checked on small hand-written traces, and every bad trace is one line and exit 2 from the
real CLI.
"""

from __future__ import annotations

import gzip
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from mobidfl.analysis.cli import main
from mobidfl.errors import ConfigError
from mobidfl.maps.contact_trace import ContactTrace, read_contacts
from mobidfl.model.contacts import one_connection_events

SMALL = ["--set", "map=grid:8x8", "--set", "vehicles=14", "--set", "pedestrians=0",
         "--set", "sensors=0", "--set", "uavs=0", "--set", "steps=3", "--set", "seed=5",
         "--set", "test_size=60", "--set", "policy=cached_lru", "--set", "link=fixed_rate"]
"""Cached-DFL cars with a fixed-rate link: encounter order, intervals and bytes all count."""
TRACE = ["--set", "vehicle.mobility=contact_trace"]


@pytest.fixture(scope="module")
def map_run(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("map") / "out"
    code = main(["run", "--out", str(out), "--quiet", *SMALL,
                 "--set", "contacts_out=csv,parquet,one"])
    assert code == 0
    return out


def _trace_run(tmp: Path, trace: Path, *extra: str) -> pd.DataFrame:
    out = tmp / f"trace_{trace.name}"
    code = main(["run", "--out", str(out), "--quiet", *SMALL, *TRACE,
                 "--set", f"contact_trace.file={trace}", *extra])
    assert code == 0
    return pd.read_csv(out / "model.csv")


def _crawdad(contacts: pd.DataFrame, path: Path, *, id_base: int = 0, start: float = 0.0):
    """The contact table as an absolute-time ``a b t_start t_end`` table."""
    offset = (contacts["step"] - 1) * 120.0 + start
    pd.DataFrame({
        "a": contacts["a"] + id_base, "b": contacts["b"] + id_base,
        "t_start": offset + contacts["t_start"], "t_end": offset + contacts["t_end"],
    }).to_csv(path, sep=" ", header=False, index=False)
    return path


def test_contacts_out_writes_the_table_as_csv_parquet_and_one_events(map_run):
    csv = pd.read_csv(map_run / "contacts.csv")
    parquet = pd.read_parquet(map_run / "contacts.parquet")
    pd.testing.assert_frame_equal(csv, parquet, check_dtype=False)
    assert list(csv.columns) == ["step", "a", "b", "t_start", "t_end", "d_min"]
    assert len(csv) > 20 and set(csv["step"]) == {1, 2, 3}
    events = (map_run / "contacts_one.txt").read_text().splitlines()
    assert len(events) == 2 * len(csv)
    assert all(line.split()[1] == "CONN" for line in events)


@pytest.mark.parametrize("name", ["contacts.csv", "contacts.parquet", "contacts_one.txt",
                                  "crawdad.dat"])
def test_exported_contacts_replayed_as_a_trace_give_the_map_runs_results(
    map_run, tmp_path, name
):
    """Same seed, same policy, same link: the trace run exchanges exactly what the map run
    did (contacts per step, bytes, aborts, accuracy)."""
    expected = pd.read_csv(map_run / "model.csv")
    trace = map_run / name
    if name == "crawdad.dat":
        trace = _crawdad(pd.read_csv(map_run / "contacts.csv"), tmp_path / name)
    got = _trace_run(tmp_path, trace, "--set", "contacts_out=csv")
    if name == "contacts.csv":  # a trace run exports the trace's table again
        pd.testing.assert_frame_equal(
            pd.read_csv(tmp_path / f"trace_{name}" / "contacts.csv").drop(columns="d_min"),
            pd.read_csv(trace).drop(columns="d_min"),
        )
    for column in ("contacts", "neighbours_mean", "transfers_aborted", "acc_mean", "acc_min"):
        np.testing.assert_array_equal(got[column], expected[column], err_msg=column)
    # The ONE's file keeps microseconds (%.6f): bytes agree to that resolution (each end of
    # a stay +-5e-7 s: relative <= 1e-6 for stays of >= 1 s; measured 2.8e-12)
    np.testing.assert_allclose(got["bytes_sent"], expected["bytes_sent"], rtol=1e-6)


def test_a_thinned_trace_changes_the_exchanges(map_run, tmp_path):
    """The trace run's contacts are the trace's, not the parked positions'."""
    contacts = pd.read_csv(map_run / "contacts.csv")
    thinned = contacts[(contacts["a"] + contacts["b"]) % 2 == 0]
    thinned.to_csv(tmp_path / "thin.csv", index=False)
    got = _trace_run(tmp_path, tmp_path / "thin.csv")
    expected = thinned.groupby("step")[["a", "b"]].apply(lambda f: len(f.drop_duplicates()))
    assert got["contacts"].iloc[1:].tolist() == expected.reindex([1, 2, 3], fill_value=0).tolist()


def test_crawdad_table_is_cut_into_steps_with_id_base_and_start(tmp_path):
    path = tmp_path / "haggle.dat"
    path.write_text("# a b start end (further columns ignored)\n"
                    "1 2 1100 1150 1 0\n"    # 100..150 after start_s: steps 1 and 2
                    "3 1 1200 1300 1 0\n"    # 200..300: steps 2 and 3, ids 3 1 -> 0 2
                    "2 3 900 1010 1 0\n")    # starts before start_s: cut to [0, 10]
    trace = ContactTrace(read_contacts(path), step_s=120.0, n_agents=3, id_base=1,
                         start_s=1000.0)
    rows = {step: [(int(a), int(b), s, e) for a, b, s, e in zip(
        t.a, t.b, t.t_start, t.t_end, strict=True)] for step, t in
        ((k, trace.table(k)) for k in (1, 2, 3, 4))}
    assert rows == {1: [(0, 1, 100.0, 120.0), (1, 2, 0.0, 10.0)],
                    2: [(0, 1, 0.0, 30.0), (0, 2, 80.0, 120.0)],
                    3: [(0, 2, 0.0, 60.0)], 4: []}
    one = trace.table(1)
    assert trace.adjacency(one).nnz == 4 and not trace.has_distance
    short = ContactTrace(read_contacts(path), step_s=120.0, n_agents=3, id_base=1,
                         start_s=1000.0, steps=2)  # a run of 2 steps keeps only those
    assert short.step.max() == 2 and len(short.step) == 4


def test_one_events_with_prefixes_comments_messages_and_an_open_connection(tmp_path):
    path = tmp_path / "events.txt"
    path.write_text("# The ONE StandardEventsReader\n\n"
                    "10 CONN p0 p1 up\n"
                    "12 C M1 p0 p1 100\n"            # a message event: skipped
                    "20.5 CONN p1 p0 down wlan0\n"   # either order, optional interface
                    "30 CONN 2 3 down\n"             # file order: down first at one time ...
                    "30 CONN 2 3 up\n"               # ... a zero-length contact all the same
                    "40 CONN 0 2 UP\n")              # never closed: ends at the last event
    c = read_contacts(path)
    rows = sorted(zip(c.a.tolist(), c.b.tolist(), c.t_start.tolist(), c.t_end.tolist(),
                      strict=True))
    assert rows == [(0, 1, 10.0, 20.5), (0, 2, 40.0, 40.0), (2, 3, 30.0, 30.0)]


def test_one_export_alternates_each_pairs_events_at_equal_times():
    frame = pd.DataFrame({"step": [1, 1, 2], "a": [0, 0, 0], "b": [1, 1, 1],
                          "t_start": [5.0, 120.0, 0.0], "t_end": [120.0, 120.0, 3.0],
                          "d_min": [1.0, 1.0, 1.0]})
    events = one_connection_events(frame, step_s=120.0)
    assert events["state"].tolist() == ["up", "down", "up", "down", "up", "down"]
    assert events["time"].tolist() == [5.0, 120.0, 120.0, 120.0, 120.0, 123.0]


def test_distance_rate_needs_distances_from_the_trace(tmp_path):
    from mobidfl.model.world import MobiDFLModel

    path = tmp_path / "t.dat"
    path.write_text("0 1 0 30\n")
    settings = {"map": "grid:3x3", "vehicles": 2, "pedestrians": 0, "sensors": 0, "uavs": 0,
                "learning": False, "vehicle.mobility": "contact_trace",
                "contact_trace.file": str(path)}
    with pytest.raises(ConfigError, match="link.model.*contact_trace.distance_m"):
        MobiDFLModel(**settings, **{"link.model": "distance_rate"})
    model = MobiDFLModel(**settings, **{"link.model": "distance_rate",
                                        "contact_trace.distance_m": 50.0})
    model.step()
    assert model.contact_table.d_min.tolist() == [50.0]
    assert np.isfinite(model.link.plan(model.contact_table, kinds=model.kind_of,
                                       message_bytes=1000, n=2).capacity).all()


def _bad_traces(tmp: Path) -> dict[str, tuple[bytes, str]]:
    good = b"step,a,b,t_start,t_end,d_min\n1,0,1,0.0,10.0,5.0\n"
    return {
        "missing.csv": (b"step,a,t_start,t_end\n1,0,0.0,1.0\n", "missing column"),
        "reversed.csv": (b"a,b,t_start,t_end\n0,1,9.0,3.0\n", "t_end 3.0 < t_start 9.0"),
        "negative.dat": (b"0 1 -5 3\n", "negative time"),
        "unknown_id.dat": (b"0 1 0 3\n0 99 0 3\n", "ids 0..99"),
        "text.csv": (b"a,b,t_start,t_end\n0,1,zero,3\n", "'zero' is not a finite number"),
        "nan.dat": (b"0 1 nan 3\n", "is not a finite number"),
        "self.dat": (b"1 1 0 3\n", "in contact with itself"),
        "duplicate.dat": (b"0 1 0 30\n1 0 20 40\n", "overlaps its previous stay"),
        "float_id.dat": (b"0 1.5 0 3\n", "not an integer id"),
        "short.dat": (b"0 1 0\n", "fewer than 4 columns"),
        "truncated.csv.gz": (gzip.compress(good)[:-12], "unreadable"),
        "empty.dat": (b"# nothing\n\n", "empty"),
        "one_down.txt": (b"5 CONN 0 1 down\n", "'down' without 'up'"),
        "one_twice.txt": (b"5 CONN 0 1 up\n6 CONN 1 0 up\n", "already up"),
        "one_action.txt": (b"5 CONN 0 1 up\n6 XX 0 1 2\n", "unknown action"),
        "one_state.txt": (b"5 CONN 0 1 sideways\n", "is not up or down"),
        "one_host.txt": (b"5 CONN 0 p1x up\n", "invalid host id"),
        "long_step.csv": (b"step,a,b,t_start,t_end\n1,0,1,0,500\n", "longer step_s"),
        "bad.parquet": (b"PAR1 not really", "unreadable"),
    }


def _refusal(path: Path) -> str:
    with pytest.raises(ConfigError) as caught:
        ContactTrace(read_contacts(path), step_s=120.0, n_agents=3, path=str(path))
    return str(caught.value)


def test_each_bad_trace_is_refused_in_one_line_naming_the_problem(tmp_path):
    for name, (content, words) in _bad_traces(tmp_path).items():
        path = tmp_path / name
        path.write_bytes(content)
        message = _refusal(path)
        assert "\n" not in message and "contact_trace.file" in message, (name, message)
        assert words in message, (name, message)


def test_bad_traces_from_the_cli_are_one_line_exit_2_and_write_nothing(tmp_path, capsys):
    """Through the CLI's ``main``: one case per format family (the other checks are the same
    code path, the test above)."""
    bad = _bad_traces(tmp_path)
    for name in ("duplicate.dat", "truncated.csv.gz", "one_down.txt", "unknown_id.dat"):
        content, words = bad[name]
        path = tmp_path / name
        path.write_bytes(content)
        out = tmp_path / f"out_{name}"
        capsys.readouterr()
        code = main(["run", "--out", str(out), "--quiet", "--set", "map=grid:3x3", "--set",
                     "vehicles=3", "--set", "pedestrians=0", "--set", "sensors=0", "--set",
                     "uavs=0", "--set", "learning=false", "--set", "steps=1", *TRACE,
                     "--set", f"contact_trace.file={path}"])
        lines = capsys.readouterr().err.strip().splitlines()
        assert code == 2, (name, lines)
        assert len(lines) == 1 and "contact_trace.file" in lines[0], (name, lines)
        assert words in lines[0], (name, lines[0])
        assert not out.exists(), name


def test_a_kind_not_on_the_trace_is_refused(tmp_path):
    from mobidfl.model.world import MobiDFLModel

    path = tmp_path / "t.dat"
    path.write_text("0 1 0 30\n")
    with pytest.raises(ConfigError, match="pedestrian.mobility.*contact_trace"):
        MobiDFLModel(map="grid:3x3", vehicles=2, pedestrians=1, sensors=0, uavs=0,
                     learning=False, **{"vehicle.mobility": "contact_trace",
                                        "contact_trace.file": str(path)})


def test_contacts_out_refuses_unknown_formats():
    from mobidfl.model.config import Config

    with pytest.raises(ConfigError, match="contacts_out"):
        Config(vehicles=1).updated(contacts_out="csv,xml")
    assert Config().updated(contacts_out="parquet, one").contacts_out == "parquet, one"


def test_recorded_contacts_survive_a_checkpoint_without_a_link_model(tmp_path):
    from mobidfl.model.checkpoint import load, save_atomic
    from mobidfl.model.world import MobiDFLModel

    settings = {"map": "grid:6x6", "vehicles": 8, "pedestrians": 0, "sensors": 0, "uavs": 0,
                "learning": False, "steps": 3, "contacts_out": "parquet"}
    whole = MobiDFLModel(**settings).run()
    half = MobiDFLModel(**settings).run(steps=1)
    save_atomic(half.state_dict(), tmp_path / "state.pt")
    resumed = MobiDFLModel(**settings)
    resumed.load_state_dict(load(tmp_path / "state.pt"))
    resumed.run()
    assert whole.link.ideal and len(whole.contacts_table()) > 0
    pd.testing.assert_frame_equal(resumed.contacts_table(), whole.contacts_table())


def test_damaged_traces_read_or_refuse_in_one_line_never_a_traceback(tmp_path):
    """Every cut and every byte replaced by markup or junk (a small exhaustive fuzz): a
    trace that still parses is a trace, anything else one ConfigError line."""
    valid = {
        "t.csv": b"step,a,b,t_start,t_end,d_min\n1,0,1,0.5,10.0,5.0\n2,1,2,0.0,3.0,\n",
        "t.dat": b"# haggle\n1 2 100 150 1 0\n2 3 160 170 1 0\n",
        "t.txt": b"10 CONN p0 p1 up\n12 C M1 p0 p1 100\n20 CONN 1 0 down\n",
    }
    outcomes = {"read": 0, "refused": 0}
    for name, content in valid.items():
        variants = [content[:cut] for cut in range(len(content))]
        for i in range(len(content)):
            for junk in (b",", b" ", b"\n", b"-", b"x", b"\x00", b"\xff"):
                variants.append(content[:i] + junk + content[i + 1:])
        for k, variant in enumerate(variants):
            path = tmp_path / f"{k}_{name}"
            path.write_bytes(variant)
            try:
                ContactTrace(read_contacts(path), step_s=120.0, n_agents=4, path=str(path))
                outcomes["read"] += 1
            except ConfigError as exc:
                assert "\n" not in str(exc) and "contact_trace" in str(exc), (variant, exc)
                outcomes["refused"] += 1
    assert outcomes["read"] > 50 and outcomes["refused"] > 50, outcomes
