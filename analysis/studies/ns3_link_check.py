"""ns-3 check of the link model: two cars passing each other, replayed in ns-3 802.11p.

A first, small check. Two cars drive at each other (ns-3
``ConstantVelocityMobilityModel``, the same straight lines as ``tests/model/test_links.py``), one
sends saturating UDP to the other over ad-hoc 802.11p (10 MHz, 5.9 GHz; ARP caches filled
beforehand, so no ARP timer eats the contact), and the bytes the receiver got are compared
with what MobiDFL's link model says the same contact carries (its whole capacity, one way):

* ``fixed``: ns-3 at a constant 6 Mbit/s (``OfdmRate6MbpsBW10MHz``) with a
  ``RangePropagationLossModel`` cut at R, so the contact window is MobiDFL's exactly;
  against ``fixed_rate`` at 6 Mbit/s with ``link.efficiency = 1``. The ratio is the MAC's
  efficiency (preamble, DIFS, back-off, ACK, headers): the default of ``link.efficiency``
  comes from it (the calibration).
* ``distance``: ns-3 with log-distance loss (exponent 2.1, 47.9 dB at 1 m), 23 dBm and
  ``IdealWifiManager`` (the best rate for the SNR), against ``distance_rate`` with the
  ``dsrc`` profile (efficiency 1) and a radius far beyond the radio's reach.

Needs the optional extra: ``pip install 'mobidfl[ns3]'`` (the ``ns3`` package, ns-3 3.44).
Run: ``python -m mobidfl.analysis.studies.ns3_link_check`` (``--offsets 0,20,60 --speeds 13.89,8``).
"""

from __future__ import annotations

import argparse
import math
import time

import numpy as np

from mobidfl.model.config import Config
from mobidfl.model.contacts import contact_intervals, sub_samples
from mobidfl.model.links import make_link
from mobidfl.model.links_ns3 import install_adhoc


def ns3_pass(
    *, speed: float, offset: float, gap: float, mode: str, radius: float | None
) -> float:
    """Bytes a saturating UDP flow delivers while two cars pass (ns-3, 802.11p ad hoc)."""
    from ns import ns

    ns.Simulator.Destroy()
    nodes = ns.NodeContainer()
    nodes.Create(2)
    mobility = ns.MobilityHelper()
    mobility.SetMobilityModel("ns3::ConstantVelocityMobilityModel")
    mobility.Install(nodes)
    for k, (x, y, v) in enumerate(((-gap / 2, 0.0, speed), (gap / 2, offset, -speed))):
        model = nodes.Get(k).GetObject[ns.ConstantVelocityMobilityModel]()
        model.SetPosition(ns.Vector(x, y, 0.0))
        model.SetVelocity(ns.Vector(v, 0.0, 0.0))
    channel = ns.YansWifiChannelHelper()
    channel.SetPropagationDelay("ns3::ConstantSpeedPropagationDelayModel")
    if radius is not None:
        channel.AddPropagationLoss("ns3::RangePropagationLossModel",
                                   "MaxRange", ns.DoubleValue(radius))
    else:
        channel.AddPropagationLoss("ns3::LogDistancePropagationLossModel",
                                   "Exponent", ns.DoubleValue(2.1),
                                   "ReferenceLoss", ns.DoubleValue(47.9))
    phy = ns.YansWifiPhyHelper()
    phy.SetChannel(channel.Create())
    phy.Set("TxPowerStart", ns.DoubleValue(23.0))
    phy.Set("TxPowerEnd", ns.DoubleValue(23.0))
    wifi = ns.WifiHelper()
    wifi.SetStandard(ns.WIFI_STANDARD_80211p)
    if mode == "ideal":
        wifi.SetRemoteStationManager("ns3::IdealWifiManager")
    else:
        wifi.SetRemoteStationManager("ns3::ConstantRateWifiManager",
                                     "DataMode", ns.StringValue(mode),
                                     "ControlMode", ns.StringValue(mode))
    interfaces = install_adhoc(ns, wifi, phy, nodes)
    seconds = gap / speed / 2 + 10.0
    sink = ns.PacketSinkHelper("ns3::UdpSocketFactory",
                               ns.InetSocketAddress(ns.Ipv4Address.GetAny(), 9).ConvertTo())
    sink_apps = sink.Install(nodes.Get(1))
    onoff = ns.OnOffHelper("ns3::UdpSocketFactory",
                           ns.InetSocketAddress(interfaces.GetAddress(1), 9).ConvertTo())
    onoff.SetConstantRate(ns.DataRate("30Mbps"), 1472)
    apps = onoff.Install(nodes.Get(0))
    apps.Start(ns.Seconds(0.0))
    apps.Stop(ns.Seconds(seconds))
    ns.Simulator.Stop(ns.Seconds(seconds))
    ns.Simulator.Run()
    received = float(sink_apps.Get(0).GetObject[ns.PacketSink]().GetTotalRx())
    ns.Simulator.Destroy()
    return received


def mobidfl_pass(
    *, speed: float, offset: float, gap: float, settings: dict, radius: float
) -> float:
    """Bytes MobiDFL's link model gives the same pass (the whole capacity, one way)."""
    step_s = gap / speed / 2 + 10.0
    count = max(sub_samples(max_step_distance=speed * step_s, radius_m=radius), 64)
    t = np.arange(count + 1) / count * step_s
    a = np.stack([-gap / 2 + speed * t, np.zeros_like(t)], axis=1)
    b = np.stack([gap / 2 - speed * t, np.full_like(t, offset)], axis=1)
    table = contact_intervals(np.stack([a, b], axis=1), radius_m=radius, step_s=step_s)
    link = make_link(Config.from_settings(settings))
    plan = link.plan(table, kinds=np.array(["vehicle", "vehicle"]), message_bytes=1, n=2)
    return float(plan.capacity.sum())


def main() -> None:
    """Command line of the check."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--offsets", default="0,20,60")
    parser.add_argument("--speeds", default="13.89,8.0")
    parser.add_argument("--radius", type=float, default=100.0)
    args = parser.parse_args()
    started = time.perf_counter()
    from ns import ns  # noqa: F401 - the import alone takes seconds: time it apart

    print(f"ns-3 import {time.perf_counter() - started:.1f} s")
    rows = []
    for speed in map(float, args.speeds.split(",")):
        for offset in map(float, args.offsets.split(",")):
            window = 2 * math.sqrt(max(args.radius**2 - offset**2, 0.0)) / (2 * speed)
            start = time.perf_counter()
            fixed_ns3 = ns3_pass(speed=speed, offset=offset, gap=1600.0,
                                 mode="OfdmRate6MbpsBW10MHz", radius=args.radius)
            fixed_ours = mobidfl_pass(speed=speed, offset=offset, gap=1600.0, radius=args.radius,
                                      settings={"link.model": "fixed_rate",
                                                "link.fixed_rate.rate_bps": 6e6,
                                                "link.efficiency": 1.0})
            far_ns3 = ns3_pass(speed=speed, offset=offset, gap=3000.0, mode="ideal", radius=None)
            far_ours = mobidfl_pass(speed=speed, offset=offset, gap=3000.0, radius=1400.0,
                                    settings={"link.model": "distance_rate", "link.profile": "dsrc",
                                              "link.efficiency": 1.0})
            wall = time.perf_counter() - start
            rows.append((speed, offset, window, fixed_ns3, fixed_ours, far_ns3, far_ours, wall))
            print(f"v {speed:5.2f} m/s, offset {offset:4.0f} m, window {window:5.2f} s | "
                  f"6 Mbit/s within R: ns-3 {fixed_ns3 / 1e6:6.3f} MB, MobiDFL "
                  f"{fixed_ours / 1e6:6.3f} MB, ratio {fixed_ns3 / fixed_ours:5.3f} | "
                  f"by distance (dsrc): ns-3 {far_ns3 / 1e6:7.2f} MB, MobiDFL "
                  f"{far_ours / 1e6:7.2f} MB, ratio {far_ns3 / max(far_ours, 1):5.3f} | "
                  f"{wall:.1f} s")
    ratios = np.array([r[3] / r[4] for r in rows])
    far = np.array([r[5] / max(r[6], 1) for r in rows])
    print(f"fixed 6 Mbit/s: ns-3 / MobiDFL = {ratios.mean():.3f} (min {ratios.min():.3f}, "
          f"max {ratios.max():.3f}): the MAC efficiency to apply to a PHY rate")
    print(f"distance (dsrc): ns-3 / MobiDFL = {far.mean():.3f} (min {far.min():.3f}, "
          f"max {far.max():.3f})")


if __name__ == "__main__":
    main()
