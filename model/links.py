"""Link models: what a contact can carry.

Every system MobiDFL implements assumes two devices in range swap whole models at once.
A link model (setting ``link.model``, alias ``link``) replaces that with a radio: each stay
in range (:class:`mobidfl.model.contacts.ContactTable`) carries a number of bytes, from a rate, a
set-up latency, frame loss with MAC retries and one radio shared among a device's
simultaneous contacts. Policies that honour the link (``ExchangePolicy.honours_link``)
send their messages in their own order and count only those that arrive before the
contact ends; the others refuse a non-ideal link (the link checks of
:mod:`mobidfl.model.config`).

Plug-ins, registered by name in :data:`mobidfl.plugins.LINKS`:

* ``ideal`` (default): no link model; every result is what it was without link models.
* ``fixed_rate``: one rate (``link.fixed_rate.rate_bps``), or one per pair of kinds
  (``link.fixed_rate.kind_rates``), whatever the distance.
* ``distance_rate``: the rate at the pair's distance, from a step table
  (``link.distance_rate.table``, The ONE's ``DistanceCapacityInterface``) or from
  log-distance path loss and Shannon's capacity with a radio profile (``link.profile``:
  :data:`PROFILES`).

Settings every link model reads are :class:`LinkSettings` (namespace ``link``); a model's
own are its ``settings_class`` under ``link.<name>``. The short old names
(``link.rate_bps``, ``link.table``, ``link.kind_rates``) stay accepted
(:func:`mobidfl.model.config.old_names`).

A link model's contract is :meth:`LinkModel.plan` (what each stay of a step can carry);
the rate-based ones derive it from :meth:`RateLink.rate`. The maths are pure functions in
:mod:`mobidfl.model.maths.link`.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from mobidfl.contact_table import ContactTable
from mobidfl.model.maths.energy import J_PER_FLOP, parse_kind_values
from mobidfl.model.maths.link import (
    delivered_prefix,
    expected_attempts,
    fair_split,
    message_loss_probability,
    overlap_counts,
    parse_kind_rates,
    parse_rate_table,
    shannon_rate,
    table_rate,
)
from mobidfl.plugins import LINKS
from mobidfl.settings import (
    KINDS,
    PluginSettings,
    at_least_one,
    non_negative,
    one_of,
    positive,
    setting,
)

__all__ = [
    "PROFILES",
    "DistanceRateSettings",
    "FixedRateSettings",
    "LinkModel",
    "LinkPlan",
    "LinkSettings",
    "RateLink",
    "make_link",
]

RNG_TAG = 0x11A4
"""Second word of the link's own generator seed ``[seed, RNG_TAG]`` (frame loss draws)."""

PROFILES: dict[str, dict[str, float]] = {
    # IEEE 802.11p / DSRC / ITS-G5 at 5.9 GHz on a 10 MHz channel (IEEE 802.11-2016,
    # clause 17 at 10 MHz spacing: 3-27 Mbit/s; minimum sensitivity -85 dBm at 3 Mbit/s and
    # -68 dBm at 27 Mbit/s, Table 17-18 less 3 dB); 23 dBm transmit power (ETSI EN 302 571
    # allows up to 33 dBm EIRP; 20-23 dBm is the usual OBU setting); path-loss exponent 2.1
    # below the 100 m break point of Cheng et al., "Mobile vehicle-to-vehicle narrow-band
    # channel measurement ... 5.9 GHz DSRC", IEEE JSAC 25(8), 2007; 1 m loss = free space
    # at 5.9 GHz (47.9 dB). gap 18 dB: with a 9 dB noise figure it puts 3 Mbit/s near
    # -85 dBm and 27 Mbit/s near -68 dBm (the sensitivities above, within 2 dB).
    "dsrc": {
        "tx_dbm": 23.0, "bandwidth_hz": 10e6, "noise_figure_db": 9.0, "loss_1m_db": 47.9,
        "exponent": 2.1, "gap_db": 18.0, "cap_bps": 27e6, "sensitivity_dbm": -85.0,
    },
    # LTE-V2X sidelink (PC5, mode 4) at 5.9 GHz, 10 MHz: 3GPP TR 36.885 Table A.1.2-1
    # (UE power 23 dBm, noise figure 9 dB) and its WINNER+ B1 LOS path loss
    # PL = 22.7 log10(d) + 27 + 20 log10(5.9) (exponent 2.27, 42.4 dB at 1 m); Rel-14 PC5
    # tops out near 20 Mbit/s in 10 MHz (16QAM; assumed cap); sensitivity -95 dBm and the
    # 18 dB gap of dsrc are assumptions.
    "cv2x": {
        "tx_dbm": 23.0, "bandwidth_hz": 10e6, "noise_figure_db": 9.0, "loss_1m_db": 42.4,
        "exponent": 2.27, "gap_db": 18.0, "cap_bps": 20e6, "sensitivity_dbm": -95.0,
    },
    # Wi-Fi Direct between phones, 2.4 GHz, 20 MHz, 802.11n 1x1 (MCS7 with short guard:
    # 72.2 Mbit/s cap); 15 dBm (a phone's usual power, assumed); sensitivity -82 dBm at
    # 6 Mbit/s (IEEE 802.11-2016 Table 17-18); exponent 3 for pedestrians among buildings
    # (Rappaport Table 4.2: urban 2.7-3.5); 1 m loss = free space at 2.4 GHz (40.0 dB).
    "wifi_direct": {
        "tx_dbm": 15.0, "bandwidth_hz": 20e6, "noise_figure_db": 10.0, "loss_1m_db": 40.0,
        "exponent": 3.0, "gap_db": 18.0, "cap_bps": 72.2e6, "sensitivity_dbm": -82.0,
    },
    # Bluetooth LE 2M PHY (Bluetooth Core 5.0), 0 dBm, 2 MHz; sensitivity -92 dBm (a
    # current chip's datasheet value at 2 Mbit/s, e.g. Nordic nRF52840); application
    # throughput about 1.4 Mbit/s (cap); exponent 3 as for wifi_direct.
    "ble": {
        "tx_dbm": 0.0, "bandwidth_hz": 2e6, "noise_figure_db": 10.0, "loss_1m_db": 40.0,
        "exponent": 3.0, "gap_db": 18.0, "cap_bps": 1.4e6, "sensitivity_dbm": -92.0,
    },
}
"""Radio profiles of ``distance_rate`` without a table: ``shannon_rate`` parameters with the
source of each value. ``dsrc`` is checked against ns-3 802.11p on real contacts
(``python -m validation --cases ns3_link``, docs/validation/ns3.md): its rate curve holds
within R, and ``link.efficiency`` is fitted there (0.59 for the MAC, 0.48 for TCP)."""


def _known_link(value: str) -> str | None:
    names = LINKS.names()
    return None if value in names else "one of " + ", ".join(names)


def _table_check(value: str) -> str | None:
    if not value.strip():
        return None
    try:
        parse_rate_table(value)
    except ValueError as exc:
        return str(exc)
    return None


# Shaped as _table_check: a settings check returns its parser's message (one per parser).
def _kind_rates_check(value: str) -> str | None:
    try:
        parse_kind_rates(value, KINDS)
    except ValueError as exc:
        return str(exc)
    return None


def _kind_values_check(value: str) -> str | None:
    try:
        parse_kind_values(value, KINDS)
    except ValueError as exc:
        return str(exc)
    return None


def _efficiency_check(value: float) -> str | None:
    return None if 0.0 < value <= 1.0 else "a number in (0, 1]"


def _loss_check(value: float) -> str | None:
    return None if 0.0 <= value < 1.0 else "a number in [0, 1)"


@dataclass(frozen=True, kw_only=True)
class LinkSettings(PluginSettings):
    """Settings every link model reads (namespace ``link``).

    Each model's own settings are its ``settings_class`` under ``link.<name>``
    (``link.fixed_rate.rate_bps``).

    Attributes
    ----------
    model : str
        The link model by name (``ideal``, ``fixed_rate``, ``distance_rate``, ``ns3``).
    profile : str
        The radio (:data:`PROFILES`) of the models that simulate one: ``distance_rate``
        without a table, ``ns3``.
    efficiency, setup_s : float
        Share of the rate that carries model bytes; seconds before the first byte.
    loss, retries, frame_bytes : float, int, int
        Frame loss chance, MAC retries per frame and frame payload.
    shared_radio, resume : bool
        One radio shared by a device's contacts; unfinished models resume at the next contact.
    dtype, params, overhead_bytes : str, int, int
        What one model weighs on the air.
    tx_w, rx_w, kind_j_per_flop : float, float, str
        Radio power sending and receiving; training energy per FLOP by kind.
    server_up_bps, server_down_bps : float
        MoFeL's client-to-server and server-to-client rates.
    """

    namespace: ClassVar[str] = "link"
    model: str = setting(
        "ideal",
        "link model: ideal (every contact carries everything at once, as before), fixed_rate, "
        "distance_rate, ns3 (packet-level 802.11p in ns-3, <= 50 agents, the ns3 extra)",
        _known_link,
        alias="link",
    )
    efficiency: float = setting(
        0.59,
        "share of the rate that carries model bytes (MAC overhead: preamble, DIFS, back-off, "
        "ACK, headers, collisions); 0.59 = ns-3 802.11p with both cars of a contact sending "
        "at 27 Mbit/s, fitted on 200 real Manhattan contacts (python -m validation --cases "
        "ns3_link); one car alone at 6 Mbit/s measures 0.84 (analysis/studies/ns3_link_check.py); "
        "TCP transfers fit 0.48",
        _efficiency_check,
    )
    setup_s: float = setting(
        0.0,
        "seconds from entering range to the first byte (802.11p OCB mode needs no "
        "association: 0)",
        non_negative,
    )
    profile: str = setting(
        "dsrc",
        "radio profile (dsrc = 802.11p, cv2x = LTE-V2X sidelink, "
        "wifi_direct, ble)",
        one_of(*PROFILES), readers=("distance_rate", "ns3"),
    )
    loss: float = setting(
        0.0, "chance a frame attempt is lost (each frame retried up to `retries` times)",
        _loss_check,
    )
    retries: int = setting(
        7, "MAC retries per frame (802.11 dot11ShortRetryLimit: 7)", non_negative
    )
    frame_bytes: int = setting(1500, "frame payload in bytes (an Ethernet-size MTU)", at_least_one)
    shared_radio: bool = setting(
        True, "one radio per device: its simultaneous contacts share its rate"
    )
    resume: bool = setting(
        False,
        "an unfinished model continues at the pair's next contact (DTN custody transfer) "
        "instead of being lost",
    )
    dtype: str = setting(
        "fp32", "bytes per parameter on the air: fp32 (4), bf16 (2) or int8 (1)",
        one_of("fp32", "bf16", "int8"),
    )
    params: int = setting(
        0,
        "parameters per model on the air (0 = the run's network; 11689512 = ResNet-18, "
        "to study a larger model's bytes while training a small one)",
        non_negative,
    )
    overhead_bytes: int = setting(
        64, "bytes added to every model message (origin, timestamp, sample count; assumed)",
        non_negative,
    )
    tx_w: float = setting(
        0.0522,
        "radio power while sending, W (ns-3 WifiRadioEnergyModel: TxCurrentA 0.0174 A at 3 V)",
        non_negative,
    )
    rx_w: float = setting(
        0.0591,
        "radio power while receiving, W (ns-3 WifiRadioEnergyModel: RxCurrentA 0.0197 A at 3 V)",
        non_negative,
    )
    kind_j_per_flop: str = setting(
        "",
        "energy of one training FLOP per kind, J, e.g. vehicle:1.1e-11,sensor:1.5e-10 (kinds "
        "left out: mobidfl.model.maths.energy.J_PER_FLOP, data-sheet peaks of a vehicle SoC, a "
        "phone GPU, a Cortex-M4F sensor MCU and a UAV's Jetson Nano)",
        _kind_values_check,
    )
    server_up_bps: float = setting(
        6e6,
        "server link (MoFeL client to edge server) upload bit/s (6 Mbit/s: ETSI ITS-G5 / "
        "802.11p default rate to a road-side unit; inf = unlimited, with accounting)",
        positive,
        inf=True,
    )
    server_down_bps: float = setting(
        6e6,
        "server link (MoFeL edge server to client) download bit/s (6 Mbit/s: ITS-G5 / "
        "802.11p default rate from a road-side unit; inf = unlimited, with accounting)",
        positive,
        inf=True,
    )


class LinkModel(ABC):
    """Base of the link plug-ins.

    The contract is :meth:`plan`: what each stay in range of one step can carry (a
    :class:`LinkPlan`, which then sends the policies' messages over it). How a model gets there is
    its own: a rate over the pair's distance (:class:`RateLink`) or a packet-level replay (``ns3``).

    A link model is one class registered by name in :data:`mobidfl.plugins.LINKS`; the
    settings it alone reads are its :attr:`settings_class` under the namespace
    ``link.<name>`` (``link.fixed_rate.rate_bps``), the ones every model reads are
    :class:`LinkSettings` (``link.efficiency``). docs/reference/layout.md, "Adding a link
    model", walks through a new one.

    Parameters
    ----------
    settings
        The run's settings (the model reads its seed, ``link`` and ``link.<name>``).

    Attributes
    ----------
    options : LinkSettings
        The settings every link model reads (namespace ``link``).
    own : PluginSettings or None
        This model's own settings (namespace ``link.<name>``; ``None`` without a
        :attr:`settings_class`).
    rng : numpy.random.Generator
        The link's own generator (frame loss draws), seeded ``[seed, RNG_TAG]``.
    """

    name: ClassVar[str]
    """The model's name: the value of ``link.model`` that selects it."""
    common_settings_class: ClassVar[type[PluginSettings]] = LinkSettings
    """The settings every link model reads (namespace ``link``), composed by
    :class:`mobidfl.model.config.Config` once for the whole family."""
    settings_class: ClassVar[type[PluginSettings] | None] = None
    """This model's own settings (a frozen :class:`~mobidfl.settings.PluginSettings`
    dataclass whose ``namespace`` is ``link.<name>``); :class:`mobidfl.model.config.Config`
    composes, documents and validates them. Checked when the class is defined."""
    ideal: ClassVar[bool] = False
    """True: no link model at all (``ideal``); :meth:`plan` is never called."""
    needs_distance: ClassVar[bool] = False
    """True: :meth:`plan` depends on the pair's distance (a contact trace without distances
    refuses it)."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        own = cls.__dict__.get("settings_class")
        name = cls.__dict__.get("name")
        if own is not None and name is not None and own.namespace != f"link.{name}":
            raise TypeError(
                f"link model {name}: settings_class {own.__qualname__} has namespace "
                f"{own.namespace!r}; a link model's own settings live under 'link.{name}'"
            )

    def __init__(self, *, settings: Any) -> None:
        self.options: LinkSettings = LinkSettings.of(settings)
        own = type(self).settings_class
        self.own: Any = None if own is None else own.of(settings)
        self.rng = np.random.default_rng([int(getattr(settings, "seed", 0)), RNG_TAG])
        self.partial: dict[tuple[int, int], tuple[Any, float]] = {}
        """``link.resume``: per (sender, receiver) the unfinished message and bytes done."""

    def label(self) -> str:
        """How the app names this link in its status line.

        Returns
        -------
        str
            The name, with what tells its settings apart where a model has that
            (``fixed_rate (6 Mbit/s)``); default: the name.
        """
        return self.name

    def j_per_flop(self) -> dict[str, float]:
        """Joules per training FLOP per kind.

        ``link.kind_j_per_flop`` over the defaults (:data:`mobidfl.model.maths.energy.J_PER_FLOP`).
        """
        return J_PER_FLOP | parse_kind_values(self.options.kind_j_per_flop, KINDS)

    @abstractmethod
    def plan(
        self, table: ContactTable, *, kinds: np.ndarray, message_bytes: int, n: int
    ) -> LinkPlan:
        """What each stay in range of this step can carry.

        Parameters
        ----------
        table
            The step's stays in range (one row per pair and stay, with its chord pieces).
        kinds
            Every agent's kind name, indexed by agent id.
        message_bytes
            Bytes of one model message on the air.
        n
            Number of agents (pair keys are ``a * n + b``).

        Returns
        -------
        LinkPlan
            Per stay its capacity (bytes) and the radio's byte rate while it serves the
            stay; the plan then carries the policies' messages in their own order.
        """

    def state_dict(self) -> dict[str, Any]:
        """The link's state for a checkpoint: its generator and the transfers still in progress."""
        return {
            "rng": self.rng.bit_generator.state,
            "partial": [[a, b, list(key), done] for (a, b), (key, done) in self.partial.items()],
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore what :meth:`state_dict` returned."""
        self.rng.bit_generator.state = state["rng"]
        self.partial = {
            (int(a), int(b)): (tuple(key), float(done)) for a, b, key, done in state["partial"]
        }


class RateLink(LinkModel):
    """A link model whose stays carry what a rate gives.

    :meth:`rate` between two agents at a distance, turned into each stay's bytes by :meth:`plan`.

    Parameters
    ----------
    settings
        The run's settings, as for :class:`LinkModel`.
    """

    @abstractmethod
    def rate(self, distance: np.ndarray, kind_a: np.ndarray, kind_b: np.ndarray) -> np.ndarray:
        """Bit/s between agents of ``kind_a`` and ``kind_b`` at ``distance`` metres."""

    def plan(
        self, table: ContactTable, *, kinds: np.ndarray, message_bytes: int, n: int
    ) -> LinkPlan:
        """Bytes each stay in range of ``table`` can carry.

        From :meth:`rate` averaged over the stay (4 points per chord piece), after ``setup_s``,
        times the MAC's ``efficiency``, shared by each device's simultaneous contacts, and slowed by
        frame retries.
        """
        o = self.options
        rows = table.piece_row
        nodes = (np.arange(4) + 0.5) / 4
        t = table.piece_t0[:, None] + (table.piece_t1 - table.piece_t0)[:, None] * nodes
        rel = table.piece_rel0[:, None, :] + t[..., None] * table.piece_relv[:, None, :]
        distance = np.hypot(rel[..., 0], rel[..., 1])
        kind_a, kind_b = kinds[table.a][rows], kinds[table.b][rows]
        rate = self.rate(distance, kind_a[:, None], kind_b[:, None]).mean(axis=1)
        begin = table.t_start[rows] + o.setup_s
        usable = np.maximum(0.0, table.piece_end - np.maximum(table.piece_start, begin))
        with np.errstate(invalid="ignore"):  # inf x 0: an unlimited rate carries all
            carried = np.where(np.isinf(rate), np.inf, np.where(usable > 0, rate * usable, 0.0))
        bits = np.bincount(rows, weights=carried, minlength=len(table))
        seconds = np.bincount(rows, weights=usable, minlength=len(table))
        share = radio_share(table) if o.shared_radio else np.ones(len(table))
        capacity = bits / 8.0 * o.efficiency / share / expected_attempts(o.loss, o.retries)
        # The radio's rate while it serves this contact (the share is a time split): airtime
        # is bytes / this rate, so a device's overlapping contacts never add up to more
        # radio time than they last.
        with np.errstate(invalid="ignore", divide="ignore"):
            byte_rate = np.where(
                seconds > 0, capacity * share / np.where(seconds > 0, seconds, 1), 0.0
            )
        return LinkPlan(
            table=table, capacity=capacity, byte_rate=byte_rate, n=n,
            message_bytes=message_bytes, link=self,
        )


def radio_share(table: ContactTable) -> np.ndarray:
    """Per stay, how many ways its busier end's one radio is shared.

    The most stays of either device that overlap it (an upper bound on the share over the stay).
    """
    if not len(table):
        return np.ones(0)
    count = overlap_counts(
        np.concatenate([table.a, table.b]),
        np.concatenate([table.t_start, table.t_start]),
        np.concatenate([table.t_end, table.t_end]),
    )
    return np.maximum(count[: len(table)], count[len(table) :]).astype(float)


class LinkPlan:
    """One step's contacts with the bytes each can carry, and the tally of what was sent.

    Policies call :meth:`swap_models` (every pair sends one model each way: D-PSGD and its
    weighted variants) or :meth:`send` (ordered message lists: Cached-DFL). Both sides of a
    contact share it half and half (:func:`mobidfl.model.maths.link.fair_split`), a message counts
    only when whole before the contact ends, and a whole message is still lost when one of
    its frames fails every retry. Each pair exchanges once per step (as the policies do under
    ``ideal``, and the Cached-DFL authors' code), over its stay of the step that carries the
    most (a graze at exactly R carries nothing; the pair may meet properly later).

    Parameters
    ----------
    table
        The step's stays in range (one row per stay).
    capacity
        Bytes each stay can carry.
    byte_rate
        Bytes per second of each stay (the airtime of what it carries).
    n
        Agents in the world (the tallies' length).
    message_bytes
        Bytes of one model message.
    link
        The link model that made the plan (its loss, retries and partial transfers).
    """

    COLUMNS = ("bytes_sent", "bytes_received", "transfers_aborted", "airtime_s")
    TRANSFER_COLUMNS = ("sender", "receiver", "bytes_sent", "bytes_received", "aborted")
    """Columns of :meth:`transfers` (one row per direction of each exchange)."""

    def __init__(
        self, *, table: ContactTable, capacity: np.ndarray, byte_rate: np.ndarray, n: int,
        message_bytes: int, link: LinkModel,
    ) -> None:
        self.table = table
        self.capacity = capacity
        self.byte_rate = byte_rate
        self.n = n
        self.message_bytes = int(message_bytes)
        self.link = link
        keys = table.a * n + table.b
        best = np.lexsort((-capacity, keys))  # per pair, the stay that carries the most first
        first = np.ones(len(best), bool)
        first[1:] = keys[best[1:]] != keys[best[:-1]]
        self._first = best[first]
        self._keys = keys[self._first]
        self.sent = np.zeros(n)
        self.received = np.zeros(n)
        self.aborted = np.zeros(n, np.int64)
        self.tx_s = np.zeros(n)
        self.rx_s = np.zeros(n)
        self.used = np.zeros(len(table))
        """Bytes of each stay already spent by earlier phases of the step (PSFL sends its
        model, then collects and distributes federation models over the same contacts)."""
        self._log: list[tuple[np.ndarray, ...]] = []  # what _tally saw, for transfers()

    def rows_of(self, pairs: np.ndarray) -> np.ndarray:
        """Row of each pair's best stay in range (-1 when the pair had none)."""
        pairs = np.asarray(pairs, np.int64).reshape(-1, 2)
        keys = np.minimum(pairs[:, 0], pairs[:, 1]) * self.n + np.maximum(pairs[:, 0], pairs[:, 1])
        at = np.searchsorted(self._keys, keys)
        at = np.minimum(at, max(len(self._keys) - 1, 0))
        found = (len(self._keys) > 0) & (self._keys[at] == keys) if len(self._keys) else \
            np.zeros(len(keys), bool)
        return np.where(found, self._first[at] if len(self._first) else -1, -1)

    def _lost(self, sizes: np.ndarray, done: np.ndarray) -> np.ndarray:
        o = self.link.options
        if o.loss <= 0.0 or not done.any():
            return np.zeros(len(sizes), bool)
        chance = message_loss_probability(
            sizes, frame_bytes=o.frame_bytes, loss=o.loss, retries=o.retries
        )
        return done & (self.link.rng.random(len(sizes)) < chance)

    def _tally(self, src: np.ndarray, dst: np.ndarray, sent: np.ndarray, got: np.ndarray,
               aborted: np.ndarray, rate: np.ndarray) -> None:
        with np.errstate(invalid="ignore", divide="ignore"):
            air = np.where(sent > 0, sent / np.where(rate > 0, rate, np.inf), 0.0)
        np.add.at(self.sent, src, sent)
        np.add.at(self.received, dst, got)
        np.add.at(self.aborted, src, aborted.astype(np.int64))
        np.add.at(self.tx_s, src, air)
        np.add.at(self.rx_s, dst, air)
        self._log.append((src, dst, sent, got, aborted))

    def swap_models(self, pairs: np.ndarray) -> np.ndarray:
        """Every pair ``(a, b)`` sends one model each way.

        Returns the directed pairs ``(receiver, sender)`` whose model arrived whole before the
        contact ended.
        """
        pairs = np.asarray(pairs, np.int64).reshape(-1, 2)
        size = np.full(len(pairs), float(self.message_bytes))
        to_b, to_a = self.swap(pairs, size, size)
        return np.concatenate([
            np.stack([pairs[to_b, 1], pairs[to_b, 0]], axis=1),
            np.stack([pairs[to_a, 0], pairs[to_a, 1]], axis=1),
        ])

    def swap(
        self, pairs: np.ndarray, size_ab: np.ndarray, size_ba: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """One message each way per pair ``(a, b)`` over what its best stay has left.

        ``size_ab`` bytes from a to b and ``size_ba`` from b to a (0: none); returns whether each
        arrived whole (a message of 0 bytes never counts as arrived).
        """
        pairs = np.asarray(pairs, np.int64).reshape(-1, 2)
        rows = self.rows_of(pairs)
        known = rows >= 0
        cap, rate = np.zeros(len(rows)), np.zeros(len(rows))
        cap[known] = np.maximum(0.0, self.capacity[rows[known]] - self.used[rows[known]])
        rate[known] = self.byte_rate[rows[known]]
        size_ab = np.broadcast_to(np.asarray(size_ab, float), (len(pairs),))
        size_ba = np.broadcast_to(np.asarray(size_ba, float), (len(pairs),))
        got_a, got_b = fair_split(size_ab, size_ba, cap)
        arrivals = []
        for src, dst, got, size in (
            (pairs[:, 0], pairs[:, 1], got_a, size_ab), (pairs[:, 1], pairs[:, 0], got_b, size_ba)
        ):
            whole = got >= size
            lost = self._lost(size, whole)
            arrived = whole & ~lost & (size > 0)
            sent = np.minimum(got, size)
            self._tally(src, dst, sent, np.where(arrived, size, 0.0),
                        (~whole & (got > 0)) | (lost & (size > 0)), rate)
            np.add.at(self.used, rows[known], sent[known])
            arrivals.append(arrived)
        return arrivals[0], arrivals[1]

    def send(
        self, a: int, b: int, out_a: list[tuple[Any, int]], out_b: list[tuple[Any, int]]
    ) -> tuple[list[Any], list[Any]]:
        """Ordered messages ``(id, bytes)`` both ways between ``a`` and ``b`` over their best stay.

        From ``a`` to ``b`` and from ``b`` to ``a`` over their best stay in range; returns the ids
        that arrived at ``b`` and at ``a``.

        The first unfinished message is lost, or with ``link.resume`` kept for the pair's
        next contact (its remaining bytes only, if the sender still holds it then).
        """
        row = int(self.rows_of(np.array([[a, b]]))[0])
        cap = max(0.0, float(self.capacity[row] - self.used[row])) if row >= 0 else 0.0
        rate = float(self.byte_rate[row]) if row >= 0 else 0.0
        resume = self.link.options.resume
        sizes = []
        for src, dst, out in ((a, b, out_a), (b, a, out_b)):
            held = self.link.partial.get((src, dst)) if resume else None
            sizes.append(np.array(
                [max(0.0, s - held[1]) if held is not None and i == held[0] else float(s)
                 for i, s in out], float,
            ))
        got = fair_split(sizes[0].sum(), sizes[1].sum(), cap)
        arrived_ids: list[list[Any]] = []
        for (src, dst, out), need, budget in zip(((a, b, out_a), (b, a, out_b)), sizes, got,
                                                 strict=True):
            count, partial = delivered_prefix(need, float(budget))
            whole = np.arange(len(need)) < count
            lost = self._lost(need, whole)
            arrived = whole & ~lost
            sent = float(need[:count].sum()) + partial
            if row >= 0:
                self.used[row] += sent
            aborted = int(lost.sum()) + (1 if partial > 0 else 0)
            self._tally(np.array([src]), np.array([dst]), np.array([sent]),
                        np.array([float(need[arrived].sum())]), np.array([aborted]),
                        np.array([rate]))
            if resume:
                held = self.link.partial.pop((src, dst), None)
                if partial > 0:
                    key = out[count][0]
                    before = held[1] if held is not None and held[0] == key else 0.0
                    self.link.partial[(src, dst)] = (key, before + partial)
            arrived_ids.append([out[k][0] for k in np.flatnonzero(arrived)])
        return arrived_ids[0], arrived_ids[1]

    def server_link(
        self, agents: np.ndarray, *, need: np.ndarray, window_s: np.ndarray, up: bool
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Agents move ``need`` more bytes to (``up``) or from their edge server.

        Each within ``window_s`` seconds, at ``link.server_up_bps`` / ``link.server_down_bps`` times
        the MAC's ``efficiency``, slowed by frame retries (as :meth:`LinkModel.plan`).

        Returns the bytes moved, the seconds it took and whether the message is now whole.
        The caller keeps partial progress (a connection to a server lasts while the client
        stays in its territory, unlike a contact) and calls :meth:`abort` when it is dropped.
        Uploads count in ``bytes_sent`` and transmit time; downloads count in
        ``bytes_received`` (whole messages) and receive time; the server is not an agent.
        """
        o = self.link.options
        agents = np.asarray(agents, np.int64)
        need = np.asarray(need, float)
        bits = o.server_up_bps if up else o.server_down_bps
        rate = bits / 8.0 * o.efficiency / expected_attempts(o.loss, o.retries)
        if math.isinf(rate):
            moved, seconds = need.copy(), np.zeros(len(need))
        else:
            moved = np.minimum(need, rate * np.maximum(np.asarray(window_s, float), 0.0))
            seconds = moved / rate
        whole = moved >= need - 1e-9
        if up:
            np.add.at(self.sent, agents, moved)
            np.add.at(self.tx_s, agents, seconds)
        else:
            np.add.at(self.received, agents, np.where(whole, self.message_bytes, 0.0))
            np.add.at(self.rx_s, agents, seconds)
        return moved, seconds, whole

    def abort(self, agents: np.ndarray) -> None:
        """Count one aborted transfer for each of ``agents`` (begun, never finished)."""
        np.add.at(self.aborted, np.asarray(agents, np.int64), 1)

    def transfers(self) -> dict[str, np.ndarray]:
        """The step's transfers, one row per direction of each exchange (:attr:`TRANSFER_COLUMNS`).

        Sender, receiver, bytes put on the air, bytes of whole messages that arrived, messages
        aborted or lost. Per pair, what :meth:`per_agent` sums per agent: the app draws each
        contact's progress from it.
        """
        kinds = (np.int64, np.int64, float, float, np.int64)
        return {
            name: np.concatenate([np.ravel(entry[k]) for entry in self._log]).astype(kind)
            if self._log else np.empty(0, kind)
            for k, (name, kind) in enumerate(zip(self.TRANSFER_COLUMNS, kinds, strict=True))
        }

    def per_agent(self) -> dict[str, np.ndarray]:
        """The step's tally per agent: the link columns (energy is added by the session)."""
        return {
            "bytes_sent": self.sent.copy(),
            "bytes_received": self.received.copy(),
            "transfers_aborted": self.aborted.astype(float),
            "airtime_s": self.tx_s + self.rx_s,
            "energy_radio_j": self.link.options.tx_w * self.tx_s
            + self.link.options.rx_w * self.rx_s,
        }


@dataclass(frozen=True, kw_only=True)
class FixedRateSettings(PluginSettings):
    """Settings of ``fixed_rate`` (namespace ``link.fixed_rate``).

    Attributes
    ----------
    rate_bps : float
        Bit/s of every pair whose kinds ``kind_rates`` does not name.
    kind_rates : str
        Bit/s per pair of kinds (``vehicle-vehicle:6e6,pedestrian-sensor:1e6``).
    """

    namespace: ClassVar[str] = "link.fixed_rate"
    rate_bps: float = setting(
        6e6,
        "bit/s (6 Mbit/s: the default data rate of ETSI ITS-G5 / 802.11p at "
        "10 MHz; inf = unlimited, with byte and energy accounting)",
        positive,
        inf=True,
        alias="link.rate_bps",
    )
    kind_rates: str = setting(
        "",
        "bit/s per pair of kinds, e.g. vehicle-vehicle:6e6,pedestrian-sensor:1e6 "
        "(other pairs: rate_bps)",
        _kind_rates_check,
        alias="link.kind_rates",
    )


@dataclass(frozen=True, kw_only=True)
class DistanceRateSettings(PluginSettings):
    """Settings of ``distance_rate`` (namespace ``link.distance_rate``).

    Its radio without a table is the common ``link.profile``.

    Attributes
    ----------
    table : str
        A DISTANCE:RATE step table (empty: the profile's path-loss + Shannon curve).
    """

    namespace: ClassVar[str] = "link.distance_rate"
    table: str = setting(
        "",
        "step table DISTANCE:RATE (m:bit/s), rates never rising, e.g. "
        "0:27e6,50:12e6,100:6e6 (empty = the profile's path-loss + Shannon curve)",
        _table_check,
        alias="link.table",
    )


def _kind_pair_rates(
    options: FixedRateSettings, kind_a: np.ndarray, kind_b: np.ndarray
) -> np.ndarray:
    rates = np.full(np.broadcast_shapes(kind_a.shape, kind_b.shape), options.rate_bps)
    for (first, second), value in parse_kind_rates(options.kind_rates, KINDS).items():
        match = ((kind_a == first) & (kind_b == second)) | ((kind_a == second) & (kind_b == first))
        rates = np.where(match, value, rates)
    return rates


@LINKS.register
class IdealLink(RateLink):
    """The ideal link: no link model.

    Every contact carries every message at once (every system's assumption, and MobiDFL's without a
    link model).
    """

    name = "ideal"
    ideal = True

    def rate(self, distance: np.ndarray, kind_a: np.ndarray, kind_b: np.ndarray) -> np.ndarray:
        return np.full(np.shape(distance), np.inf)


@LINKS.register
class FixedRateLink(RateLink):
    """A constant rate per pair of kinds, whatever the distance within range.

    ``link.fixed_rate.kind_rates``, else ``link.fixed_rate.rate_bps`` (The ONE's
    ``SimpleBroadcastInterface``).
    """

    name = "fixed_rate"
    settings_class = FixedRateSettings
    own: FixedRateSettings

    def label(self) -> str:
        if self.own.kind_rates.strip():
            return self.name
        return f"{self.name} ({self.own.rate_bps / 1e6:g} Mbit/s)"

    def rate(self, distance: np.ndarray, kind_a: np.ndarray, kind_b: np.ndarray) -> np.ndarray:
        rates = _kind_pair_rates(self.own, np.asarray(kind_a), np.asarray(kind_b))
        return np.broadcast_to(rates, np.broadcast_shapes(np.shape(distance), rates.shape))


@LINKS.register
class DistanceRateLink(RateLink):
    """Rate by distance.

    The step table ``link.distance_rate.table`` (The ONE's ``DistanceCapacityInterface``) or the
    ``link.profile`` radio's path loss + Shannon capacity.
    """

    name = "distance_rate"
    settings_class = DistanceRateSettings
    own: DistanceRateSettings
    needs_distance = True

    def label(self) -> str:
        return f"{self.name} ({'table' if self.own.table.strip() else self.options.profile})"

    def rate(self, distance: np.ndarray, kind_a: np.ndarray, kind_b: np.ndarray) -> np.ndarray:
        if self.own.table.strip():
            distances, rates = parse_rate_table(self.own.table)
            return table_rate(distance, distances, rates)
        return shannon_rate(distance, **PROFILES[self.options.profile])


def make_link(settings: Any) -> LinkModel:
    """The link model ``settings`` name (``link.model``)."""
    return LINKS.make(LinkSettings.of(settings).model, settings=settings)
