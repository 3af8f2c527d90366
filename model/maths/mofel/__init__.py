"""MoFeL: mobility-aware client selection across several central servers (pure maths).

Modules: :mod:`.visits` (connection intervals, eqs. 5-7), :mod:`.selection` (the central
station, eqs. 1-8 and 10), :mod:`.baselines` (A1, A2). Test-only helpers (routes to
intervals, c_nst tables, NTC/NFC replays) live in ``tests/mofel_oracle.py``.

MoFeL (Macedo et al., *Mobility-Aware Federated Learning Considering Multiple Networks*,
Sensors 23(14):6286, 2023). Each central server s (an edge server) covers a territory of path
length d_s; client n moves at speed v_n and needs tau_n time units of local training, so it
stays d_s / v_n in s's territory (Sec. 4). A central station knows every client's predicted
route and, for the servers that requested retraining within a window, selects *when* each
server starts a training cycle and *which* clients join it, so that every selected client
stays connected for the whole cycle (eqs. 1-8; eq. 10 limits trainings per client).

The stored copy of the paper lost its formulas; this module follows the prose that describes
each equation (Sec. 4) and says where it had to choose (see each docstring):

* eq. 2: x_ns = 1 => client n takes part at least once in the interval [t0, t0 + Delta];
* eqs. 3-4: y_nst marks n training for s at t; with eq. 2, sum_t y_nst = tau_n x_ns;
* eqs. 5-6: y_nst <= c_nst, the connection indicator built from route, speed and d_s;
* eq. 7: training is continuous (one uninterrupted block);
* eq. 8: every client of s stays available until the slowest one finishes (max tau_n);
* eq. 1: minimise sum_s E_s, with E_s predicted from the number of contributing clients
  (the paper's own choice); here: lexicographically maximise (servers served, clients
  selected, earliness of the starts) - see :func:`select_exact`.

Times are continuous; a connection interval is half-open [enter, exit), and training on
[start, start + tau) fits iff enter <= start and start + tau <= exit (the discrete-step
reading of eqs. 5-7: steps start .. start + tau - 1 all connected).
"""

from mobidfl.model.maths.mofel.baselines import select_a1, select_a2
from mobidfl.model.maths.mofel.selection import (
    METHODS,
    Cycle,
    Selection,
    select,
    select_exact,
    select_greedy,
    selection_key,
)
from mobidfl.model.maths.mofel.visits import Visits, connected_until, feasible

__all__ = [
    "METHODS",
    "Cycle",
    "Selection",
    "Visits",
    "connected_until",
    "feasible",
    "select",
    "select_a1",
    "select_a2",
    "select_exact",
    "select_greedy",
    "selection_key",
]
