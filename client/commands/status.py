"""`nnrt status`: the device manager and every driver — state, health, runs, memory.

The default text fits 100 columns (the spare's state, runs ok/failed, long notes wrapped):

    devmgr:   running, pid 812, up 5m03s, config /etc/nnrt/devmgr.toml
              2 driver(s): 1 ready, 1 failed (failed: npu)
    runtime:  /run/nnrt

    DRIVER  KIND  PID  STATE   HEALTH   RESTARTS  UPTIME  STANDBY  RUNS OK/FAILED  IN FLIGHT  MEMORY
    cpu     cpu   815  ready   SERVING  0         5m03s   ready    1204/3          1          4.0 MiB
    npu     cpu   -    failed  -        4         -       -        -               -          -

`--wide` shows everything, as below; `--watch` refreshes (every `--interval`, default 2 s;
`--count N` refreshes then stop; Ctrl-C leaves with exit 0), redrawing the screen on a
terminal (not with TERM=dumb, nor into a pipe: there each refresh follows the last, after a
header line); `--watch --json`: one JSON object per line. `--json` alone is unchanged.

    devmgr:   running, pid 812, up 5m03s, config /etc/nnrt/devmgr.toml
              2 driver(s): 1 ready, 1 failed (failed: npu)
    runtime:  /run/nnrt

    DRIVER  KIND  PID  STATE   HEALTH   RESTARTS  LAST EXIT  UPTIME  STANDBY          IN FLIGHT  ...  PREPARED  MEMORY   BUDGET
    cpu     cpu   815  ready   SERVING  0         -          5m03s   ready (pid 816)  1          ...  3         4.0 MiB  11.8 GiB
    npu     cpu   -    failed  -        4         exit 1     -       -                -          ...  -         -        -

      npu: crash loop: 5 failures within 60 s (last: exit 1)
      cpu budgets: shared memory 11.8 GiB (a session 2.9 GiB), model memory 2.9 GiB per run
      cpu run queue: 2 cores, 2 in use, 3 runs waiting; 1204 runs waited, 1.8 ms on average
      cpu session 3 (pid 2040): 2 buffers, 4.0 MiB, 1 prepared model; run mailbox: 5120 runs
      pid 2040: prepared models on gpu (2), cpu (1): partitions of a model over several
        devices, or models of their own

State, restarts and the warm spare (STANDBY: its state and pid; `-` when standby is off)
come from the device manager (when one runs); health from a grpc.health.v1 probe; runs,
sessions, memory (bytes of shared buffers each session holds) and the budgets (BUDGET: the
shared memory all sessions may hold) and the run queue of a driver with a core budget (the
CPU driver's onnxruntime engine: its cores, those in use, the runs waiting for one now, and
since its start how many runs waited, their mean wait and how many callers gave up while
queued) from the driver's admin service (`nnrt.admin.v1.NnrtAdmin/GetStatus`).

PREPARED counts the prepared models the driver holds for all its sessions. A driver knows
nothing of partitions: a model compiled over several devices (client/core/hetero.py) is one
prepared model per partition on each driver its plan uses (its fallback plans' too, with
failover). So a client process whose sessions hold prepared models on several drivers is
said once, with its count on each ("clients" in --json: every process with prepared
models, by pid). Which partition each prepared model is, is the client's to say
(`Compiled.explain()`, `nnrt run --explain`).

Exit codes: 0 every driver ready and SERVING, 1 some driver is not (failed, restarting,
unreachable, ...), 3 nothing running (no device manager, no driver).
"""

from __future__ import annotations

import argparse
import json
import sys
import textwrap
import time
from dataclasses import dataclass

from nnrt.client.commands.common import (DURATION_HELP, EXIT_FAILURE, EXIT_OK,
                                         EXIT_UNREACHABLE, add_common_arguments, devmgr_status,
                                         directory_of, duration, format_bytes, format_duration,
                                         format_exit, known_drivers, positive_int, print_json,
                                         probe_driver, redraws, say, table)

HEADERS = ("DRIVER", "KIND", "PID", "STATE", "HEALTH", "RESTARTS", "LAST EXIT", "UPTIME",
           "STANDBY", "IN FLIGHT", "RUNS OK/FAILED/ABANDONED", "SESSIONS", "PREPARED", "MEMORY",
           "BUDGET")
# the default table (100 columns); STANDBY goes after UPTIME when some driver has a spare
NARROW_HEADERS = ("DRIVER", "KIND", "PID", "STATE", "HEALTH", "RESTARTS", "UPTIME",
                  "RUNS OK/FAILED", "IN FLIGHT", "MEMORY")
WIDTH = 100  # columns of the default text
WATCH_INTERVAL = 2.0  # s, as watch(1)


def add_parser(sub) -> None:
    parser = sub.add_parser("status", help="the device manager and drivers: health, runs, memory",
                            description="Show the device manager and every driver: state, "
                                        "health, runs in flight, memory held per session.")
    add_common_arguments(parser)
    parser.add_argument("--wide", "-w", action="store_true",
                        help="every column and note: last exit, the spare's pid, sessions, "
                             "prepared models, budgets (default: a table of 100 columns)")
    parser.add_argument("--watch", action="store_true",
                        help="refresh until Ctrl-C, like top (--json: a JSON object per line)")
    parser.add_argument("--interval", "-n", type=duration, default=WATCH_INTERVAL,
                        metavar="DURATION",
                        help=f"--watch: time between refreshes ({DURATION_HELP}; default "
                             f"{WATCH_INTERVAL:g} s)")
    parser.add_argument("--count", type=positive_int, metavar="N",
                        help="--watch: stop after N refreshes (default: until Ctrl-C)")
    parser.set_defaults(func=run)


def collect(directory, devmgr: dict | None) -> list[dict]:
    managed = {d["name"]: d for d in devmgr["drivers"]} if devmgr else {}
    drivers = []
    for name in known_drivers(directory, devmgr):
        entry = managed.get(name)
        probe = probe_driver(directory, name, admin=True)
        admin = probe.admin
        if entry is not None:
            state = entry["state"]
        else:
            state = "running" if probe.serving else "unreachable"
        sessions = None
        if admin is not None:
            sessions = [{"session_id": s.sessionId, "peer_pid": s.peerPid, "buffers": s.buffers,
                         "buffer_bytes": s.bufferBytes, "prepared_models": s.preparedModels,
                         "prepared_model_names": list(s.preparedModelNames),
                         "run_mailbox": s.runMailbox, "mailbox_runs": s.mailboxRuns}
                        for s in admin.sessions]
        drivers.append({
            "name": name,
            "kind": entry["kind"] if entry else (admin.kind if admin else None),
            "managed": entry is not None,
            "pid": entry["pid"] if entry else (admin.pid if admin else None),
            "state": state,
            "health": probe.health,
            "restarts": entry["restarts"] if entry else None,
            "last_exit": entry["last_exit"] if entry else None,
            "reason": entry["reason"] if entry else None,
            "uptime_seconds": entry["uptime"] if entry else
            (round(admin.uptimeSeconds, 3) if admin else None),
            "device_status": probe.device_status,
            "in_flight_runs": admin.inFlightRuns if admin else None,
            "runs": {"completed": admin.runsCompleted, "failed": admin.runsFailed,
                     "abandoned": admin.runsAbandoned} if admin else None,
            "sessions": sessions,
            "memory_bytes": sum(s["buffer_bytes"] for s in sessions)
            if sessions is not None else None,
            "fault_injection": admin.faultInjectionEnabled if admin else None,
            # the device manager's warm spare: {pid, state}, None when standby is off
            "standby": entry.get("standby") if entry else None,
            "takeovers": entry.get("takeovers") if entry else None,
            "budgets": _budgets(admin),
            "run_queue": _run_queue(admin),
        })
    return drivers


def prepared_models(driver: dict) -> int | None:
    """The prepared models a driver holds for all its sessions (None: it did not say)."""
    if driver["sessions"] is None:
        return None
    return sum(s["prepared_models"] for s in driver["sessions"])


def clients(drivers: list[dict]) -> list[dict]:
    """Each client process (by pid) with prepared models, and how many on each driver;
    sessions whose pid the driver does not show are left out."""
    by_pid: dict[int, dict[str, int]] = {}
    for d in drivers:
        for s in d["sessions"] or ():
            if s["peer_pid"] and s["prepared_models"]:
                held = by_pid.setdefault(s["peer_pid"], {})
                held[d["name"]] = held.get(d["name"], 0) + s["prepared_models"]
    return [{"pid": pid, "prepared_models": held} for pid, held in sorted(by_pid.items())]


def format_client(client: dict) -> str:
    held = ", ".join(f"{name} ({count})" for name, count in client["prepared_models"].items())
    return (f"  pid {client['pid']}: prepared models on {held}: partitions of a model over "
            f"several devices, or models of their own")


def _budgets(admin) -> dict | None:
    """The driver's memory budgets (admin GetStatus), None when it did not say."""
    if admin is None or not admin.sharedMemoryBudgetBytes:
        return None  # not answering, or a driver from before budgets were reported
    return {"shared_memory_bytes": admin.sharedMemoryBudgetBytes,
            "session_memory_bytes": admin.sessionMemoryBudgetBytes,
            "model_memory_bytes": admin.modelMemoryLimitBytes,
            "shared_memory_used_bytes": admin.sharedMemoryUsedBytes,
            # per peer uid (--max-uid-memory-mb, --max-sessions-per-uid; 0: not reported)
            "uid_memory_bytes": admin.uidMemoryBudgetBytes,
            "sessions_per_uid": admin.maxSessionsPerUid,
            "uids": [{"uid": u.uid, "sessions": u.sessions,
                      "shared_memory_bytes": u.sharedMemoryBytes} for u in admin.uids]}


def _run_queue(admin) -> dict | None:
    """The driver's run queue (admin GetStatus), None without a core budget."""
    if admin is None or not admin.HasField("runQueue"):
        return None
    queue = admin.runQueue
    return {"cores": queue.cores, "cores_in_use": queue.coresInUse, "queued": queue.queued,
            "waited": queue.waited, "wait_seconds": round(queue.waitSeconds, 6),
            "gave_up": queue.gaveUp}


def format_run_queue(name: str, queue: dict) -> str:
    line = (f"  {name} run queue: {queue['cores']} core{'s' if queue['cores'] != 1 else ''}, "
            f"{queue['cores_in_use']} in use, {queue['queued']} "
            f"run{'s' if queue['queued'] != 1 else ''} waiting")
    if queue["waited"]:
        line += (f"; {queue['waited']} run{'s' if queue['waited'] != 1 else ''} waited, "
                 f"{queue['wait_seconds'] / queue['waited'] * 1e3:.1f} ms on average")
    if queue["gave_up"]:
        line += f", {queue['gave_up']} gave up waiting"
    return line


def format_standby(standby: dict | None) -> str | None:
    if standby is None:
        return None
    if standby.get("pid") is None:
        return standby.get("state") or "none"
    return f"{standby['state']} (pid {standby['pid']})"


def healthy(driver: dict) -> bool:
    return driver["state"] in ("ready", "running") and driver["health"] == "SERVING"


def format_runs(runs: dict | None, wide: bool) -> str | None:
    if runs is None:
        return None
    return ("{completed}/{failed}/{abandoned}" if wide else "{completed}/{failed}").format(**runs)


def _table(drivers: list[dict], wide: bool) -> str:
    if wide:
        return table(HEADERS, [
            (d["name"], d["kind"], d["pid"], d["state"], d["health"], d["restarts"],
             format_exit(d["last_exit"]), format_duration(d["uptime_seconds"]),
             format_standby(d["standby"]), d["in_flight_runs"], format_runs(d["runs"], True),
             len(d["sessions"]) if d["sessions"] is not None else None,
             prepared_models(d), format_bytes(d["memory_bytes"]),
             format_bytes(d["budgets"]["shared_memory_bytes"]) if d["budgets"] else None)
            for d in drivers])
    # The default fits 100 columns: the spare's state without its pid, and only when some
    # driver has one; runs ok/failed; the rest (--wide) in the notes or left out.
    standby = any(d["standby"] is not None for d in drivers)
    headers = [*NARROW_HEADERS[:7], *(("STANDBY",) if standby else ()), *NARROW_HEADERS[7:]]
    rows = []
    for d in drivers:
        row = [d["name"], d["kind"], d["pid"], d["state"], d["health"], d["restarts"],
               format_duration(d["uptime_seconds"])]
        if standby:
            row.append((d["standby"] or {}).get("state"))
        row += [format_runs(d["runs"], False), d["in_flight_runs"],
                format_bytes(d["memory_bytes"])]
        rows.append(row)
    return table(headers, rows)


def _notes(drivers: list[dict], wide: bool) -> list[str]:
    notes = [f"  {d['name']}: {d['reason']}" for d in drivers
             if d["reason"] and not healthy(d)]
    for d in drivers:
        if d["takeovers"]:
            notes.append(f"  {d['name']}: {d['takeovers']} takeover"
                         f"{'s' if d['takeovers'] != 1 else ''} by its standby")
        if d["budgets"] and wide:
            b = d["budgets"]
            per_uid = (f", a uid {format_bytes(b['uid_memory_bytes'])} and "
                       f"{b['sessions_per_uid']} sessions" if b["uid_memory_bytes"] else "")
            notes.append(f"  {d['name']} budgets: shared memory "
                         f"{format_bytes(b['shared_memory_bytes'])} "
                         f"(a session {format_bytes(b['session_memory_bytes'])}{per_uid}), "
                         f"model memory {format_bytes(b['model_memory_bytes'])} per run")
            notes.extend(f"  {d['name']} uid {u['uid']}: {u['sessions']} session"
                         f"{'s' if u['sessions'] != 1 else ''}, "
                         f"{format_bytes(u['shared_memory_bytes'])}" for u in b["uids"])
        if d["run_queue"]:
            notes.append(format_run_queue(d["name"], d["run_queue"]))
    for d in drivers if wide else ():
        for s in d["sessions"] or ():
            models = s["prepared_models"]
            notes.append(
                f"  {d['name']} session {s['session_id']} (pid {s['peer_pid'] or '?'}): "
                f"{s['buffers']} buffer{'s' if s['buffers'] != 1 else ''}, "
                f"{format_bytes(s['buffer_bytes'])}, "
                f"{models} prepared model{'s' if models != 1 else ''}"
                + (f" ({', '.join(s['prepared_model_names'])})" if s["prepared_model_names"]
                   else "")
                + (f"; run mailbox: {s['mailbox_runs']} runs" if s["run_mailbox"] else ""))
    notes.extend(format_client(c) for c in clients(drivers) if len(c["prepared_models"]) > 1)
    return notes


@dataclass
class Snapshot:
    """One look at the runtime directory: what --json prints, the text, the exit code."""

    data: dict
    code: int
    complaint: str | None  # the line for stderr when not healthy

    @property
    def running(self) -> bool:
        return self.data["devmgr"] is not None or bool(self.data["drivers"])


def snapshot(directory) -> Snapshot:
    devmgr = devmgr_status(directory)
    drivers = collect(directory, devmgr)
    if devmgr is None and not drivers:
        return Snapshot({"runtime_dir": str(directory), "devmgr": None, "drivers": [],
                         "healthy": False}, EXIT_UNREACHABLE,
                        f"nothing running: no device manager and no driver in {directory}")
    ok = all(healthy(d) for d in drivers)
    bad = [d["name"] for d in drivers if not healthy(d)]
    return Snapshot({"runtime_dir": str(directory),
                     "devmgr": devmgr["devmgr"] if devmgr else None,
                     "drivers": drivers, "clients": clients(drivers), "healthy": ok},
                    EXIT_OK if ok else EXIT_FAILURE,
                    None if ok else (f"not healthy: {', '.join(bad)}" if bad else "no drivers"))


def render(shot: Snapshot, wide: bool) -> str:
    """The text of `nnrt status` (without the complaint, which goes to stderr)."""
    data = shot.data
    if not shot.running:
        return f"nothing running: no device manager and no driver in {data['runtime_dir']}"
    lines = []
    info = data["devmgr"]
    if info is not None:
        lines.append(f"devmgr:   {info['state']}, pid {info['pid']}, up "
                     f"{format_duration(info['uptime'])}, config {info['config']}")
        lines.append(f"          {info['status']}")
    else:
        lines.append("devmgr:   not running (drivers started some other way)")
    lines.append(f"runtime:  {data['runtime_dir']}")
    drivers = data["drivers"]
    if drivers:
        lines += ["", _table(drivers, wide)]
        notes = _notes(drivers, wide)
        if not wide:  # the notes too fit the default's 100 columns
            notes = [textwrap.fill(n, WIDTH, subsequent_indent="    ") for n in notes]
        if notes:
            lines += [""] + notes
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    directory = directory_of(args)
    if args.watch:
        return watch(directory, args)
    shot = snapshot(directory)
    if args.json:
        print_json(shot.data)
    elif shot.running:
        print(render(shot, args.wide))
    if shot.complaint:
        say(shot.complaint)
    return shot.code


# -- --watch --------------------------------------------------------------------------------

CLEAR = "\x1b[H\x1b[2J"  # cursor home, clear the screen (as top and watch do)


def watch(directory, args: argparse.Namespace) -> int:
    """Refresh every --interval until Ctrl-C (exit 0) or --count refreshes (the last one's
    exit code). On a terminal each refresh redraws the screen; elsewhere (a pipe, a log,
    TERM=dumb) the refreshes follow each other, a header line each; --json: one compact JSON
    object per line."""
    redraw = not args.json and redraws(sys.stdout)
    code, done = EXIT_OK, 0
    try:
        while True:
            shot = snapshot(directory)
            code = shot.code
            if args.json:
                text = json.dumps(shot.data, separators=(",", ":"))
            else:
                header = (f"nnrt status   every {args.interval:g} s   "
                          f"{time.strftime('%H:%M:%S')}   Ctrl-C to leave")
                body = render(shot, args.wide)
                if shot.complaint and shot.running:
                    body += f"\n\n{shot.complaint}"
                text = f"{CLEAR if redraw else ''}{header}\n\n{body}\n"
            sys.stdout.write(text + ("" if redraw else "\n"))
            sys.stdout.flush()
            done += 1
            if args.count is not None and done >= args.count:
                return code
            time.sleep(args.interval)
    except KeyboardInterrupt:  # the way to leave a watch: not an interruption of a job
        if redraw:
            sys.stdout.write("\n")
            sys.stdout.flush()
        return EXIT_OK
