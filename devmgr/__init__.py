"""The device manager (`nnrt devmgr`, `python -m nnrt.devmgr`): its own program, which runs
the configured drivers as processes, supervises them, answers its control socket and serves
their metrics.

Its configuration is devmgr/config.py. It uses the driver host's parser (to check a
driver's options), systemd notify and log format, and the control socket's wire format and
command line it shares with the `nnrt` command (nnrt.common.devmgr_ctl,
nnrt.common.devmgr_cli); nothing in nnrt.server, nnrt.drivers or nnrt.client imports it.
"""
