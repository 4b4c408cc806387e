"""The device manager (`nnrt devmgr`, `python -m nnrt.devmgr`): its own program, which runs
the configured drivers as processes, supervises them, answers its control socket and serves
their metrics.

It uses the driver host's configuration (nnrt.server.devmgr_config), systemd notify and log
format, and the shared control-socket wire format and command line (nnrt.common.devmgr_ctl,
nnrt.common.devmgr_cli); nothing in nnrt.server, nnrt.drivers or nnrt.client imports it.
"""
