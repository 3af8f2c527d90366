"""Every writer class on a disk that fills mid-write: no partial file under a final name.

A 2 MB tmpfs is filled to all but a few pages, so each writer starts and runs out of space
half-way. Each case then leaves every final name either absent or byte-identical to what the
same writer writes on a roomy disk, no temporary behind, and raises an ``OSError`` naming a
final path (which the CLI prints as one line: checked for the report through the CLI).
"""

from __future__ import annotations

import errno
from pathlib import Path

import pandas as pd
import pytest

from mobidfl.atomic import TEMP_PREFIX

LEFT_FREE = 3 * 4096
"""Bytes left on the filled disk: small outputs may fit, larger ones fail half-way."""


@pytest.fixture
def full_disk(tmpfs, fill_disk):
    """The 2 MB tmpfs (``tests/conftest.py``) and a call that fills it to all but
    :data:`LEFT_FREE` bytes."""
    mount = tmpfs
    (mount / "out").mkdir()  # the output folder exists before the disk fills

    def fill() -> None:
        fill_disk(mount, LEFT_FREE)

    return mount / "out", fill


def _run_folder(folder: Path) -> Path:
    """A run folder as `mobidfl run` leaves it (model.csv, config.toml), 30 steps."""
    folder.mkdir(parents=True, exist_ok=True)
    pd.DataFrame({"step": range(1, 31), "acc_mean": [i / 40 for i in range(30)],
                  "contacts": [i % 5 for i in range(30)]}).to_csv(folder / "model.csv",
                                                                 index=False)
    (folder / "config.toml").write_text('seed = 0\npolicy = "dpsgd"\n')
    return folder


def _report(source: Path, out: Path) -> None:
    from mobidfl.analysis.report import make_report

    make_report(_run_folder(source / "run"), out=out)


def _reproduction(source: Path, out: Path) -> None:
    from mobidfl.analysis.reproduce import CACHED, variant_settings, write_report
    from mobidfl.model.config import Config

    steps = pd.DataFrame([
        {"variant": v, "seed": s, "step": t, "acc_mean": (0.5 if v == "LRU" else 0.4) + t / 100}
        for v in ("LRU", "DFL") for s in (0, 1) for t in range(4)
    ])
    resolved = {v: Config.from_settings(variant_settings(CACHED, v, scale="small"))
                for v in ("LRU", "DFL")}
    write_report(CACHED, steps, out, resolved=resolved, scale="small", seeds=[0, 1])


def _gis(source: Path, out: Path) -> None:
    import geopandas as gpd
    from shapely.geometry import Point

    from mobidfl.analysis.gis import _to_file
    from mobidfl.atomic import atomic_path

    frame = gpd.GeoDataFrame({"id": range(400), "note": ["x" * 40] * 400},
                             # 1e-4 deg apart: input data, not a tolerance
                             geometry=[Point(i * 1e-4, 40.0) for i in range(400)],
                             crs="EPSG:4326")
    final = out / "trajectories.gpkg"
    with atomic_path(final) as partial:
        for layer in ("points", "tracks"):
            _to_file(frame, partial, final, layer=layer, driver="GPKG")


def _typed(source: Path, out: Path) -> None:
    import matplotlib.pyplot as plt
    import numpy as np

    from mobidfl.atomic import write_csv, write_figure, write_npz, write_parquet

    table = pd.DataFrame({"a": np.arange(3000), "b": np.arange(3000) / 7})
    write_csv(table.head(5), out / "small.csv", index=False)
    write_parquet(table, out / "table.parquet", index=False)
    write_npz(out / "arrays.npz", a=np.arange(5000))
    fig, ax = plt.subplots()
    ax.plot(table["b"])
    write_figure(fig, out / "figure.png", dpi=100)
    plt.close(fig)
    write_csv(table, out / "table.csv", index=False)


WRITERS = {"report": _report, "reproduction": _reproduction, "gis": _gis, "typed": _typed}


def _files(folder: Path) -> dict[str, Path]:
    return {p.name: p for p in folder.iterdir() if p.is_file()}


@pytest.mark.parametrize("writer", list(WRITERS))
def test_a_disk_full_mid_write_leaves_whole_files_or_none(writer, tmp_path, full_disk):
    # Prepare: what the writer writes on a roomy disk; then a disk with a few pages free
    out, fill = full_disk
    roomy = tmp_path / "roomy"
    roomy.mkdir()
    WRITERS[writer](tmp_path / "src-roomy", roomy)
    fill()
    # Execute
    with pytest.raises(OSError) as caught:
        WRITERS[writer](tmp_path / "src", out)
    # Assert: ENOSPC naming a final name; every file there whole (as on the roomy disk)
    assert caught.value.errno == errno.ENOSPC, caught.value
    assert not Path(caught.value.filename).name.startswith(TEMP_PREFIX), caught.value.filename
    assert Path(caught.value.filename).parent == out, caught.value.filename
    expected, got = _files(roomy), _files(out)
    assert set(got) < set(expected), (sorted(got), sorted(expected))
    for name, path in got.items():
        if name.endswith(".gpkg"):
            continue  # GeoPackages carry a timestamp (never written whole here: too big)
        assert path.read_bytes() == expected[name].read_bytes(), name
    assert not [p for p in out.iterdir() if p.name.startswith(TEMP_PREFIX)]


def test_the_report_cli_on_a_full_disk_says_one_line(tmp_path, full_disk, capsys):
    from mobidfl.analysis.cli import main

    out, fill = full_disk
    run = _run_folder(tmp_path / "run")
    fill()
    code = main(["report", str(run), "--out", str(out)])
    lines = capsys.readouterr().err.strip().splitlines()
    assert code == 1
    assert len(lines) == 1, lines
    assert "No space left on device" in lines[0] and str(out) in lines[0], lines[0]
    assert not [p for p in out.iterdir() if p.name.startswith(TEMP_PREFIX)]
