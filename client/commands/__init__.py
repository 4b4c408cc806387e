"""The `nnrt` subcommands that look at running drivers: `devices`, `status`.

Exit codes, shared by every subcommand: 0 ok, 1 failure, 2 bad usage, 3 nothing running or
nothing reachable (common.py).
"""
