"""``link = "ns3"``: each contact's bytes from ns-3's packet-level 802.11p.

A link plug-in like ``distance_rate`` (:mod:`mobidfl.model.links`), but the bytes a stay in range
carries are not computed from a rate: the pair's motion during the stay is replayed in ns-3
(the optional ``ns3`` package, ns-3 3.44: ``pip install 'mobidfl[ns3]'``) over ad-hoc 802.11p
with the ``link.profile`` radio (transmit power, log-distance loss, noise figure;
``IdealWifiManager`` picks the rate by SNR) cut at the world's R, and two saturating TCP
streams (one each way, 1448 B segments) carry what they can before the stay ends. The in-order
bytes both ways are the stay's capacity; :class:`mobidfl.model.links.LinkPlan` then sends each
policy's messages over it as for the other link models.

Small worlds only (at most :data:`MAX_AGENTS` agents): ns-3 simulates every frame, about
0.2-0.8 s of CPU per second of contact (``benchmarks/ns3_step_cost.py``). Each pair is replayed
alone (node a still, node b on the pair's relative chords): no interference between pairs;
``link.shared_radio`` still divides a busy device's stays. ns-3 has its own frame losses and
retries, so ``link.loss`` must be 0. Only each pair's longest stay of the step is replayed (the
one the policies use; the others carry 0). The same replay checks the rate models in the
validation suite (``validation/ns3_link.py``).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from mobidfl.contact_table import ContactTable
from mobidfl.errors import ConfigError
from mobidfl.model.links import KINDS, PROFILES, LinkModel, LinkPlan, radio_share
from mobidfl.plugins import LINKS

__all__ = ["MAX_AGENTS", "SEGMENT", "Ns3Link", "replay_pair"]

MAX_AGENTS = 50
"""The most agents ``link = "ns3"`` accepts (cost: see the module's docstring)."""
SEGMENT = 1448
"""TCP segment size: 1500 B MTU less IP and TCP headers with timestamps (Linux's MSS on
Ethernet-size links). ns-3's default, 536 B (RFC 879's minimum), halves TCP's goodput."""
PACKET = 1472
"""UDP payload per datagram (1500 B MTU less IP and UDP headers)."""


def install_adhoc(ns: Any, wifi: Any, phy: Any, nodes: Any) -> Any:
    """Ad-hoc (OCB-like) MAC, IPv4 on 10.1.1.0/24, ARP caches filled beforehand.

    So no ARP timer eats a contact's window; returns the interfaces (their addresses).
    """
    mac = ns.WifiMacHelper()
    mac.SetType("ns3::AdhocWifiMac")
    devices = wifi.Install(phy, mac, nodes)
    ns.InternetStackHelper().Install(nodes)
    address = ns.Ipv4AddressHelper()
    address.SetBase(ns.Ipv4Address("10.1.1.0"), ns.Ipv4Mask("255.255.255.0"))
    interfaces = address.Assign(devices)
    ns.NeighborCacheHelper().PopulateNeighborCache()
    return interfaces


def replay_pair(
    waypoints: tuple[list[tuple[float, float, float]], list[tuple[float, float, float]]],
    *,
    start_s: float,
    stop_s: float,
    mode: str,
    radius_m: float,
    profile: str = "dsrc",
    need: int = 0,
) -> list[float]:
    """Bytes two nodes received in ns-3 802.11p between ``start_s`` and ``stop_s``.

    ``[at node 1, at node 0]``.

    ``waypoints``: per node ``(t, x, y)`` in seconds and metres (``WaypointMobilityModel``:
    straight lines between them, the chords of MobiDFL's contact tests). ``mode``: ``udp``
    saturates both ways (the MAC's capacity), ``tcp`` sends ``need`` bytes each way (0 = no
    limit) as one TCP stream (ordered, reliable). ARP caches are filled beforehand
    (``NeighborCacheHelper``), so no ARP timer eats the window. The channel is the profile's
    log-distance loss cut at ``radius_m`` (``RangePropagationLossModel``).
    """
    from ns import ns

    p = PROFILES[profile]
    ns.Simulator.Destroy()
    ns.Config.SetDefault("ns3::TcpSocket::SegmentSize", ns.UintegerValue(SEGMENT))
    nodes = ns.NodeContainer()
    nodes.Create(2)
    mobility = ns.MobilityHelper()
    mobility.SetMobilityModel("ns3::WaypointMobilityModel")
    mobility.Install(nodes)
    for k, points in enumerate(waypoints):
        model = nodes.Get(k).GetObject[ns.WaypointMobilityModel]()
        for t, x, y in points:
            model.AddWaypoint(ns.Waypoint(ns.Seconds(float(t)), ns.Vector(float(x), float(y), 1.5)))
    channel = ns.YansWifiChannelHelper()
    channel.SetPropagationDelay("ns3::ConstantSpeedPropagationDelayModel")
    channel.AddPropagationLoss("ns3::LogDistancePropagationLossModel",
                               "Exponent", ns.DoubleValue(p["exponent"]),
                               "ReferenceLoss", ns.DoubleValue(p["loss_1m_db"]))
    channel.AddPropagationLoss("ns3::RangePropagationLossModel",
                               "MaxRange", ns.DoubleValue(radius_m))
    phy = ns.YansWifiPhyHelper()
    phy.SetChannel(channel.Create())
    phy.Set("TxPowerStart", ns.DoubleValue(p["tx_dbm"]))
    phy.Set("TxPowerEnd", ns.DoubleValue(p["tx_dbm"]))
    phy.Set("RxNoiseFigure", ns.DoubleValue(p["noise_figure_db"]))
    wifi = ns.WifiHelper()
    wifi.SetStandard(ns.WIFI_STANDARD_80211p)
    wifi.SetRemoteStationManager("ns3::IdealWifiManager")
    interfaces = install_adhoc(ns, wifi, phy, nodes)
    factory = "ns3::UdpSocketFactory" if mode == "udp" else "ns3::TcpSocketFactory"
    sinks = []
    for src, dst in ((0, 1), (1, 0)):
        any_port = ns.InetSocketAddress(ns.Ipv4Address.GetAny(), 9).ConvertTo()
        sinks.append(ns.PacketSinkHelper(factory, any_port).Install(nodes.Get(dst)))
        target = ns.InetSocketAddress(interfaces.GetAddress(dst), 9).ConvertTo()
        if mode == "udp":
            app = ns.OnOffHelper(factory, target)
            app.SetConstantRate(ns.DataRate("30Mbps"), PACKET)
        else:
            app = ns.BulkSendHelper(factory, target)
            app.SetAttribute("MaxBytes", ns.UintegerValue(int(need)))
        apps = app.Install(nodes.Get(src))
        apps.Start(ns.Seconds(float(start_s)))
        apps.Stop(ns.Seconds(float(stop_s)))
    ns.Simulator.Stop(ns.Seconds(float(stop_s)))
    ns.Simulator.Run()
    got = [float(s.Get(0).GetObject[ns.PacketSink]().GetTotalRx()) for s in sinks]
    ns.Simulator.Destroy()
    return got


def relative_waypoints(table: ContactTable, row: int) -> list[tuple[float, float, float]]:
    """Node b's path relative to node a over stay ``row``.

    The position at each piece's start and end (seconds of the step), from the table's chords.
    """
    pieces = np.flatnonzero(table.piece_row == row)
    points: list[tuple[float, float, float]] = []
    for k in pieces:
        for time, frac in ((table.piece_start[k], table.piece_t0[k]),
                           (table.piece_end[k], table.piece_t1[k])):
            x, y = table.piece_rel0[k] + frac * table.piece_relv[k]
            if not points or time > points[-1][0] + 1e-9:
                points.append((float(time), float(x), float(y)))
    return points


@LINKS.register
class Ns3Link(LinkModel):
    """Each pair's longest stay of the step replayed in ns-3 802.11p, saturating TCP both ways.

    Its in-order bytes are the stay's capacity (small worlds, ``link.loss = 0``).
    """

    name = "ns3"
    needs_distance = True  # ns-3 replays the pair's relative motion: a trace without it is refused

    def __init__(self, *, settings: Any) -> None:
        super().__init__(settings=settings)
        import importlib.util

        count = getattr(settings, "count", None)
        agents = sum(int(count(k)) for k in KINDS) if callable(count) else 0
        if agents > MAX_AGENTS:
            raise ConfigError("link", "ns3", f"at most {MAX_AGENTS} agents (this world has "
                              f"{agents}; ns-3 simulates every frame: distance_rate scales)")
        if self.options.loss > 0:
            raise ConfigError("link.loss", self.options.loss,
                              "0 with link ns3 (ns-3 loses and retries frames itself)")
        if importlib.util.find_spec("ns") is None:
            raise ConfigError("link", "ns3", "the ns3 package: pip install 'mobidfl[ns3]'")
        self.radius_m = float(getattr(settings, "radius_m", 100.0))
        self.replayed_s = 0.0
        """Seconds of contact replayed in ns-3 so far (cost accounting)."""

    def plan(
        self, table: ContactTable, *, kinds: np.ndarray, message_bytes: int, n: int
    ) -> LinkPlan:
        """Replay each pair's longest stay in ns-3.

        Its TCP bytes both ways, after ``link.setup_s`` and shared as in
        :meth:`mobidfl.model.links.RateLink.plan`, are its capacity.
        """
        o = self.options
        duration = table.duration
        order = np.lexsort((-duration, table.a * n + table.b))
        keys = (table.a * n + table.b)[order]
        first = np.ones(len(order), bool)
        first[1:] = keys[1:] != keys[:-1]
        bits = np.zeros(len(table))
        for row in order[first]:
            start = float(table.t_start[row]) + o.setup_s
            stop = float(table.t_end[row])
            if stop <= start:
                continue
            path = relative_waypoints(table, int(row))
            t0 = path[0][0]
            origin = [(t - t0, 0.0, 0.0) for t, _, _ in path]
            moving = [(t - t0, x, y) for t, x, y in path]
            got = replay_pair((origin, moving), start_s=start - t0, stop_s=stop - t0,
                              mode="tcp", radius_m=self.radius_m * (1 + 1e-9),
                              profile=o.profile)
            bits[row] = 8.0 * sum(got)
            self.replayed_s += stop - start
        share = radio_share(table) if o.shared_radio else np.ones(len(table))
        capacity = bits / 8.0 / share
        seconds = np.maximum(duration - o.setup_s, 0.0)
        byte_rate = np.divide(  # the radio's rate while it serves this stay (airtime)
            capacity * share, seconds, out=np.zeros(len(table)), where=seconds > 0
        )
        return LinkPlan(table=table, capacity=capacity, byte_rate=byte_rate, n=n,
                        message_bytes=message_bytes, link=self)
