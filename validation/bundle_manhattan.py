"""Builds ``maps/data/manhattan_cdfl.npz`` from Cached-DFL's ``NY_Data/NewYork.csv`` (b116fea).

``python -m validation.bundle_manhattan`` (run once; the output is committed with its LICENSE
and PROVENANCE). Every CSV row is kept, in order, as a pair of indices into the distinct end
coordinates (exact floats, as the authors' ``road_sim.py`` keys its graph nodes on them), so
the map reader sees the same segments as from the CSV; duplicates are joined there
(:func:`mobidfl.maps.edges.from_segments`).
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np

from validation.refcache import REFERENCES, ensure

OUT = Path(__file__).resolve().parents[1] / "maps" / "data" / "manhattan_cdfl.npz"


def build(csv: Path, out: Path = OUT) -> Path:
    """Unique ``(lon, lat)`` node coordinates (float64) and ``[rows, 2]`` int32 segment ends."""
    import pandas as pd

    frame = pd.read_csv(csv)
    frame = frame[frame["County"] == "New York"]  # road_sim.py: data[data['County'] == County]
    ends = np.concatenate([
        frame[["StartLong", "StartLat"]].to_numpy(float),
        frame[["EndLong", "EndLat"]].to_numpy(float),
    ])
    lonlat, inverse = np.unique(ends, axis=0, return_inverse=True)
    inverse = inverse.ravel().astype(np.int32)
    n = len(frame)
    np.savez_compressed(
        out, lonlat=lonlat, segments=np.stack([inverse[:n], inverse[n:]], axis=1)
    )
    return out


def main() -> None:
    folder = ensure("cached_dfl")
    csv = folder / "NY_Data" / "NewYork.csv"
    out = build(csv)
    commit, upstream, sha = REFERENCES["cached_dfl"].files["NY_Data/NewYork.csv"]
    print(out, hashlib.sha256(out.read_bytes()).hexdigest(), commit, upstream, sha)


if __name__ == "__main__":
    main()
