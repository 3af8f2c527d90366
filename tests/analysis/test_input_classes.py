"""Classes of bad input, each covered whole: compressed traces that inflate without bound,
cut lines of The ONE's events, settings that no plug-in of the world reads, and a
checkpoint's config.toml written in an older text form."""

from __future__ import annotations

import dataclasses
import gzip
import hashlib
import re
import warnings
import zlib

import numpy as np
import pytest
import torch

from mobidfl.analysis.cli import main
from mobidfl.errors import ConfigError
from mobidfl.maps import contact_trace
from mobidfl.maps.contact_trace import inflate, read_contacts
from mobidfl.model.config import (
    KINDS,
    Config,
    InertSettingWarning,
)
from mobidfl.model.config import KINDS as INERT_KINDS
from mobidfl.model.config.fields import _plugin_namespaces as plugin_namespaces
from mobidfl.model.config.inert import _inert_settings as inert_settings

ONE = "0 CONN 1 2 up\n5.5 CONN p1 p3 up\n7 C M1 1 2\n10 CONN 1 2 down\n"


# --- compressed inputs: one pass, inflated size capped ----------------------------------------
@pytest.mark.parametrize("size", [0, 1, 1000, 3_000_000])
@pytest.mark.parametrize("members", [1, 3])
def test_inflate_gives_what_gzip_gives_for_every_size_and_member_count(size, members):
    # Prepare: random bytes (incompressible) and repeated lines (compressible)
    rng = np.random.default_rng(size)
    for data in (rng.integers(0, 256, size, dtype=np.uint8).tobytes(), b"1 2 0 9\n" * size):
        raw = b"".join(gzip.compress(data[i::members]) for i in range(members))
        # Execute / Assert
        assert inflate(raw) == gzip.decompress(raw)


@pytest.mark.parametrize("shape", ["one member", "after a small member", "many members"])
def test_inflate_stops_at_the_cap_whatever_the_bomb_looks_like(shape):
    # Prepare: 8 MiB of zeros (8 kB compressed), cap 1 MiB
    zeros = gzip.compress(b"\0" * (8 << 20))
    raw = {"one member": zeros, "after a small member": gzip.compress(b"0 1 0 5\n") + zeros,
           "many members": gzip.compress(b"\0" * (300 << 10)) * 30}[shape]
    # Execute / Assert
    with pytest.raises(ValueError, match="inflates to more than 1 MiB"):
        inflate(raw, cap=1 << 20)


@pytest.mark.parametrize("cut", [1, 10, 30, -9, -1])
def test_inflate_refuses_a_gzip_cut_short(cut):
    raw = gzip.compress(b"0 1 0 5\n" * 1000)
    with pytest.raises((EOFError, zlib.error)):
        inflate(raw[:cut])


def test_a_gzip_trace_bomb_is_refused_in_one_line_after_one_pass(tmp_path, monkeypatch):
    # Prepare: a trace that inflates to 16 MiB against a 2 MiB cap; count inflations
    path = tmp_path / "bomb.dat.gz"
    path.write_bytes(gzip.compress(b"1 2 0 10\n" + b" " * (16 << 20)))
    good = tmp_path / "good.dat.gz"
    good.write_bytes(gzip.compress(b"1 2 0 10\n3 4 5 20\n"))
    monkeypatch.setattr(contact_trace, "MAX_INFLATED_BYTES", 2 << 20)
    calls = []
    real = contact_trace.inflate
    monkeypatch.setattr(contact_trace, "inflate", lambda raw, **kw: calls.append(1) or
                        real(raw, **kw))
    # Execute
    with pytest.raises(ConfigError) as caught:
        read_contacts(path)
    calls.clear()
    contacts = read_contacts(good)  # auto format: detection and reading share one text
    # Assert
    message = str(caught.value)
    assert "\n" not in message and "contact_trace.file" in message
    assert "inflates to more than 2 MiB" in message
    assert len(contacts) == 2 and len(calls) == 1


# --- The ONE's events: a cut line says so -----------------------------------------------------
def test_every_cut_of_every_one_line_reads_or_is_refused_naming_the_line(tmp_path):
    # Prepare: each line of a valid file cut at every position (the rest of the file kept)
    lines = ONE.splitlines()
    seen_cut = 0
    for i, line in enumerate(lines):
        for at in range(1, len(line)):
            text = "\n".join(lines[:i] + [line[:at]] + lines[i + 1:]) + "\n"
            path = tmp_path / "cut.one"
            path.write_text(text)
            # Execute
            try:
                read_contacts(path, fmt="one")
            except ConfigError as exc:
                message = str(exc)
                # Assert: one line, never a placeholder for a missing field
                assert "\n" not in message and "None" not in message, (text, message)
                assert f"line {i + 1}" in message or "'down' without 'up'" in message or \
                    "already up" in message, (text, message)
                seen_cut += "cut short" in message
    assert seen_cut > 0


# --- settings no plug-in reads ------------------------------------------------------------------
BARE = {"vehicles": 4, "pedestrians": 0, "sensors": 0, "uavs": 0, "policy": "local",
        "vehicle.mobility": "static", "learning": False}


def _warned(settings: dict) -> list[str]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        Config.from_settings(settings)
    return [str(w.message) for w in caught if issubclass(w.category, InertSettingWarning)]


def _other_values(default, help_text: str):
    """Values other than ``default`` to try (the first one the setting's check accepts);
    for text, also every word of its help (the choices of an enumeration are listed there)."""
    if isinstance(default, bool):
        return [not default]
    if isinstance(default, int):
        return [default + 1, default + 2]
    if isinstance(default, float):
        return [default * 2 if default else 0.5, default + 1.0, 0.25, default / 2, 0.1]
    words = re.findall(r"[a-z][a-z0-9_]*", help_text)
    return [__file__, "vehicle:1e-11", "0:27e6,50:12e6", "vehicle-vehicle:6e6", *words]


def test_every_plugin_setting_changed_in_a_world_without_its_plugin_is_warned_in_one_line():
    # Prepare: a bare world (local policy, static mobility, ideal link); every setting of
    # every namespace given a value other than its default (one its check accepts)
    unused, used, untried = [], [], []
    for namespace, own in plugin_namespaces().items():
        for f in dataclasses.fields(own):
            name = f"{namespace}.{f.name}"
            if name == "link.model":
                continue
            default = getattr(own(), f.name)
            tries = _other_values(default, str(f.metadata.get("help", "")))
            for value in [v for v in tries if v != default]:
                # Execute
                try:
                    messages = _warned({**BARE, name: value})
                except ConfigError:
                    continue
                # Assert: one line naming it; or nothing when the bare world reads it
                if messages:
                    assert len(messages) == 1 and "\n" not in messages[0], messages
                    assert messages[0].startswith(f"{name}=")
                    assert "has no effect" in messages[0]
                    unused.append(name)
                else:
                    used.append(name)
                break
            else:
                untried.append(name)
    # the bare world reads exactly the link settings that are not a link model's own
    assert [n for n in used if not n.startswith("link.")] == [], used
    assert {"contact_trace.file", "link.fixed_rate.rate_bps", "psfl.sigma", "cached.tau_max",
            "random_walk.hm_fraction", "link.distance_rate.table", "mofel.servers"} <= set(unused)
    assert "link.tx_w" in used and INERT_KINDS == KINDS
    assert len(untried) < len(unused) / 4, untried


def test_plugin_settings_at_their_defaults_are_not_warned():
    # a full config.toml (a checkpoint's, `mobidfl settings`) names every setting
    every = {f"{n}.{f.name}": getattr(own(), f.name)
             for n, own in plugin_namespaces().items() for f in dataclasses.fields(own)}
    assert _warned({**BARE, **every}) == []


@pytest.mark.parametrize(("settings", "name"), [
    ({"link.model": "fixed_rate", "contact": "during", "policy": "dpsgd",
      "link.rate_bps": 1e6}, "link.rate_bps"),
    ({"policy": "cached_lru", "cached.tau_max": 3}, "cached.tau_max"),
    ({"vehicle.mobility": "random_walk", "random_walk.hm_fraction": 0.3},
     "random_walk.hm_fraction"),
])
def test_a_plugin_setting_is_not_warned_when_its_plugin_runs(settings, name):
    # Execute
    config = Config.from_settings({**BARE, **settings})
    # Assert: read, so not inert; the same setting without its plug-in is
    assert inert_settings(config) == []
    assert any(m.startswith(f"{name}=") for m in _warned({**BARE, name: settings[name]}))


def test_an_unused_kind_does_not_make_its_plugin_used():
    # a random_walk setting with no vehicles left: the model of an empty kind reads nothing
    messages = _warned({**BARE, "vehicles": 0, "sensors": 2, "sensor.mobility": "static",
                        "vehicle.mobility": "random_walk", "random_walk.hm_fraction": 0.3})
    assert len(messages) == 1 and messages[0].startswith("random_walk.hm_fraction=0.3")


# --- a checkpoint's config.toml in an older text form ---------------------------------------
@pytest.fixture
def checkpointed(tmp_path):
    out = tmp_path / "run"
    args = ["--set", "steps=2", "--set", "learning=false", "--set", "vehicles=5", "--quiet"]
    assert main(["run", "--out", str(out), "--checkpoint-every", "1", *args]) == 0
    return out


def _as_written_by_another_version(out, text: str) -> None:
    """config.toml in another text form, its sha recorded in state.pt as that version did."""
    (out / "checkpoint" / "config.toml").write_text(text)
    path = out / "checkpoint" / "state.pt"
    state = torch.load(path, weights_only=True)
    state["config_sha256"] = hashlib.sha256(text.encode()).hexdigest()
    torch.save(state, path)


@pytest.mark.parametrize("form", ["comments and order", "defaults left out"])
def test_a_checkpoint_of_an_older_version_resumes_without_saying_it_was_changed(
    checkpointed, capsys, form
):
    # Prepare: the same settings in another text form (an older MobiDFL's to_toml)
    path = checkpointed / "checkpoint" / "config.toml"
    lines = path.read_text().splitlines()
    scalars = [line for line in lines if "=" in line and not line.startswith("[")]
    head = lines[: lines.index(next(x for x in lines if x.startswith("[")))]
    if form == "comments and order":
        text = "# written by MobiDFL 0.x\n" + "\n".join(reversed(head)) + "\n" + \
            "\n".join(lines[len(head):]) + "\n"
    else:
        kept = [x for x in head if x.split("=")[0].strip() in ("steps", "learning", "vehicles",
                                                               "seed")]
        text = "\n".join(kept) + "\n"
    assert scalars
    _as_written_by_another_version(checkpointed, text)
    # Execute
    code = main(["run", "--resume", str(checkpointed), "--quiet"])
    # Assert
    assert code == 0, capsys.readouterr().err
    assert "changed after" not in capsys.readouterr().err


def test_a_config_edited_after_the_checkpoint_is_still_refused(checkpointed, capsys):
    # Prepare: a value changed by hand, the recorded sha left as written
    path = checkpointed / "checkpoint" / "config.toml"
    path.write_text(path.read_text().replace("vehicles = 5", "vehicles = 6"))
    # Execute
    code = main(["run", "--resume", str(checkpointed), "--quiet"])
    # Assert
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and "changed after" in err[0]
