"""The states of the device manager's drivers, as the package's modules and its metrics
read them: every state a driver can be in (STATES, in the control socket's order) and those
a driver rests in (SETTLED: systemd's READY=1 waits for every driver to reach one). The
states themselves are the control socket's wire format (common/devmgr_ctl.py).
"""

from __future__ import annotations

from nnrt.common.devmgr_ctl import DriverState

STATES = tuple(DriverState)
SETTLED = (DriverState.READY, DriverState.FAILED, DriverState.STOPPED)
