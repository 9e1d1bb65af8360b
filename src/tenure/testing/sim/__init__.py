"""Deterministic simulation: tenure's real code on simulated time and a simulated
network, in one process, where one seed decides the schedule (issue 59).

:class:`SimLoop` is the event loop (:mod:`tenure.testing.sim._loop`), its
:class:`SimNetwork` the hosts and connections (:mod:`tenure.testing.sim._network`),
their sockets :class:`SimSocket` (:mod:`tenure.testing.sim._sockets`).
"""

from tenure.testing.sim._loop import SimDeadlockError, SimLivelockError, SimLoop, SimSelector
from tenure.testing.sim._network import SimNetwork
from tenure.testing.sim._sockets import SimSocket

__all__ = [
    "SimDeadlockError",
    "SimLivelockError",
    "SimLoop",
    "SimNetwork",
    "SimSelector",
    "SimSocket",
]
