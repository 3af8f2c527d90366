"""Trace reading and interpolation (maps/traces.py) and the `trace` mobility model."""

from __future__ import annotations

import numpy as np
import pytest

from mobidfl.errors import ConfigError
from mobidfl.maps.traces import positions_at, read_trace, resolution
from mobidfl.model.config import Config
from mobidfl.model.world import MobiDFLModel

UTM = "EPSG:32618"


def _write(path, text):
    path.write_text(text)
    return path


def test_csv_xy_interpolates_and_parks_before_and_after(tmp_path):
    # Prepare: agent 10 from t=100..110, agent 2 only at t=105 (ids sorted numerically)
    path = _write(tmp_path / "t.csv", "time,id,x,y\n100,10,0,0\n110,10,100,50\n105,2,7,8\n")
    # Execute
    trace = read_trace(path, map_crs=UTM)
    # Assert: numeric ids in numeric order, time 0 = first record
    assert trace.ids.tolist() == ["2", "10"]
    np.testing.assert_allclose(positions_at(trace, 0.0), [[7, 8], [0, 0]])  # 2 parked early
    np.testing.assert_allclose(positions_at(trace, 2.5), [[7, 8], [25, 12.5]])
    np.testing.assert_allclose(positions_at(trace, 10.0), [[7, 8], [100, 50]])
    np.testing.assert_allclose(positions_at(trace, 99.0), [[7, 8], [100, 50]])  # parked after
    assert resolution(trace) == (10.0, pytest.approx(np.hypot(100, 50) / 10))


def test_fcd_and_lonlat_csv_are_projected_to_the_map_crs(tmp_path):
    # Prepare: the same point as SUMO geo FCD and as a lon/lat CSV; non-numeric ids
    fcd = _write(
        tmp_path / "f.xml",
        '<fcd-export><timestep time="3.00"><vehicle id="car_b" x="-73.97" y="40.79"/>'
        '</timestep><timestep time="4.00"><vehicle id="car_a" x="-73.97" y="40.79"/>'
        '<vehicle id="car_b" x="-73.97" y="40.791"/></timestep></fcd-export>',
    )
    csv = _write(tmp_path / "g.csv", "id,time,lon,lat\nq,0,-73.97,40.79\n")
    # Execute
    from_fcd = read_trace(fcd, map_crs=UTM, crs="EPSG:4326")
    from_csv = read_trace(csv, map_crs=UTM)
    # Assert: ids by first appearance; both in UTM 18N metres; 0.001 deg lat = ~111 m
    assert from_fcd.ids.tolist() == ["car_b", "car_a"]
    np.testing.assert_allclose(from_fcd.xy[0], from_csv.xy[0])
    assert 580_000 < from_csv.xy[0, 0] < 590_000
    assert np.hypot(*(from_fcd.xy[1] - from_fcd.xy[0])) == pytest.approx(111.0, abs=1.0)
    assert from_fcd.time.tolist() == [0.0, 1.0, 1.0]


@pytest.mark.parametrize(
    ("name", "text", "message"),
    [
        ("a.csv", "id,time,x,y,speed\n1,0,0,0,3\n", "columns id,time,lon,lat or id,time,x,y"),
        ("b.csv", "id,time,x,y\n1,5,0,0\n1,4,1,1\n", "time increasing per id"),
        ("c.csv", "id,time,x,y\n1,5,0,zero\n", "numeric time and coordinates"),
        ("d.xml", '<fcd-export><timestep time="5"/><timestep time="4"/></fcd-export>',
         "increasing time"),
        ("e.xml", "<routes/>", "SUMO FCD file"),
        ("f.xml", "<fcd-export><timestep", "well-formed XML"),
    ],
)
def test_bad_traces_fail_with_one_line(tmp_path, name, text, message):
    path = _write(tmp_path / name, text)
    with pytest.raises(ConfigError, match=message) as err:
        read_trace(path, map_crs=UTM)
    assert "\n" not in str(err.value) and "trace.file" in str(err.value)


def test_missing_trace_file_fails_before_the_run(tmp_path):
    with pytest.raises(ConfigError, match="existing SUMO FCD .xml or .csv"):
        Config().updated({"trace.file": str(tmp_path / "nope.csv")})
    with pytest.raises(ConfigError, match="trace.file"):
        MobiDFLModel(
            map="grid:3x3", vehicles=2, pedestrians=0, sensors=0, uavs=0, learning=False,
            **{"vehicle.mobility": "trace", "trace.file": ""},
        )


def test_trace_mobility_samples_every_record_and_two_kinds_take_distinct_ids(tmp_path):
    # Prepare: 3 ids on a 3x3 grid, records every 30 s (4 per 120 s step)
    x0, y0 = 586000.0, 4515000.0
    rows = ["id,time,x,y"]
    for i in range(3):
        for k in range(9):
            rows.append(f"{i},{30 * k},{x0 + 25 * k},{y0 + 100 * i}")
    path = _write(tmp_path / "grid.csv", "\n".join(rows) + "\n")
    # Execute
    model = MobiDFLModel(
        map="grid:3x3", vehicles=2, pedestrians=1, sensors=0, uavs=0, learning=False,
        steps=2, step_s=120.0, radius_m=100.0, contact="during", trace_file=str(path),
        **{"vehicle.mobility": "trace", "pedestrian.mobility": "trace"},
    ).run()
    vehicles, pedestrians = model.groups[0][2], model.groups[1][2]
    # Assert: at least 4 sub-times per step (one per record), pedestrians got id 2
    assert vehicles.max_step_distance(120.0) >= 3.5 * 100.0 / 2
    assert pedestrians.trace.ids.tolist() == ["2"]
    np.testing.assert_allclose(model.position[:, 0], x0 + 25 * 8)
    np.testing.assert_allclose(model.speed, 25 / 30)
    # rows 100 m apart: ids 0-1 and 1-2 within R, 0-2 not
    assert model.model_table().contacts.tolist()[1:] == [2, 2]
