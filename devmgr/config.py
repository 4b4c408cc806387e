"""The device manager's configuration: which drivers to run and how to look after them.

A TOML file (`tomllib`), read at start and again at every SIGHUP:

    [devmgr]                   # how drivers are watched (all optional)
    ready_timeout = 30         # s a started driver has to report SERVING
    stop_timeout = 15          # s between SIGTERM and SIGKILL when stopping a driver
    probe_interval = 1         # s between health probes of a ready driver
    probe_timeout = 1          # s a probe may take
    probe_failures = 2         # failed probes in a row before the driver is killed

    [defaults]                 # restart policy of every driver (all optional)
    restart = "on-failure"     # always | on-failure | never
    backoff_initial = 0.5      # s before the first restart; doubled per failure ...
    backoff_max = 30           # ... up to this
    crash_loop_failures = 5    # this many failures ...
    crash_loop_window = 60     # ... within this many s: the device is failed (0 failures:
                               #     no limit, restarted forever with the backoff)
    failed_retry_after = 60    # s a failed device rests before a fresh start (0: failed
                               #     until a reload), like systemd's StartLimitIntervalSec
    backoff_reset_after = 10   # s ready without a failure: failures forgotten, backoff back
                               #     to backoff_initial (0: only the window forgets them)

    [drivers.cpu]              # one table per driver; the table name is the socket name
    kind = "cpu"               # default: the name
    restart = "always"         # any [defaults] key may be overridden here
    options = { grace = 5, fault-run-delay-ms = 100 }   # nnrt-driver options
    standby = true             # keep a warm spare process (default false; per driver only)

`standby = true` (devmgr/standby.py): the device manager keeps a second process of the
driver started, imports done and device created, that takes over the name the moment the
live one dies, instead of a cold start after the backoff. It costs that process's memory;
it is a property of one driver, so it is not a [defaults] key, and changing it on a reload
starts or stops the spare without touching the live driver.

`options` become `nnrt-driver` command-line options: `key = value` → `--key value`,
`key = true` → `--key`, `false` → left out, a list → the option once per element;
underscores in keys are taken as dashes. The driver is the authority on what its options
mean, and it is asked at load: the options are parsed by nnrt-driver's own argument parser
and range checks (server/main.py `build_parser`, `parse_args`) — the host's options and
those the driver's kind declares (its plugin, nnrt.hdi.plugin) — so an unknown option or a
bad value is a configuration error naming the file, the driver and the option — refused at
start (exit 1) or at a reload (the running configuration kept) — never a driver that exits
2 at each start until the crash-loop limit.

The probe defaults find a wedge within 5 s: a driver whose session channel stops coming round
says NOT_SERVING after its stall timeout (2 s, server/host.py), and two probes a second apart
confirm it; a driver that answers nothing at all (SIGSTOP) misses two probes of 1 s each. A
run that computes for long is not a wedge (health stays SERVING): one client's large
operator never costs every client their sessions.
"""

from __future__ import annotations

import math
import os
import re
import tomllib
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import NoReturn

from nnrt.hdi.plugin import PluginError, installed_kinds

CONFIG_ENV = "NNRT_DEVMGR_CONFIG"
SYSTEM_CONFIG = Path("/etc/nnrt/devmgr.toml")
RESTART_POLICIES = ("always", "on-failure", "never")

# The configuration used when no file is given and none is installed; deploy/devmgr.toml
# says the same (a test keeps the two in step).
DEFAULT_CONFIG_TEXT = """\
[drivers.cpu]
kind = "cpu"
"""

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
_OPTION = re.compile(r"^[a-z0-9][a-z0-9-]*$")
_RESERVED_OPTIONS = {"name", "runtime-dir", "lifeline-fd", "standby-fd", "help", "h"}
_ZERO_MEANS_OFF = {"crash_loop_failures", "failed_retry_after", "backoff_reset_after"}


class ConfigError(ValueError):
    """The configuration cannot be used; the message says where and why."""


@dataclass(frozen=True)
class Settings:
    """How the device manager watches its drivers (the `[devmgr]` table)."""

    ready_timeout: float = 30.0
    stop_timeout: float = 15.0
    probe_interval: float = 1.0
    probe_timeout: float = 1.0
    probe_failures: int = 2


@dataclass(frozen=True)
class RestartPolicy:
    """When and how fast a driver is restarted (`[defaults]`, per-driver overrides)."""

    restart: str = "on-failure"
    backoff_initial: float = 0.5
    backoff_max: float = 30.0
    crash_loop_failures: int = 5  # 0: no limit
    crash_loop_window: float = 60.0
    failed_retry_after: float = 60.0  # 0: failed until a reload
    backoff_reset_after: float = 10.0  # 0: never (only the window forgets failures)

    @property
    def unlimited(self) -> bool:
        return self.crash_loop_failures == 0

    def delay(self, failures: int) -> float:
        """Seconds to wait before the restart that follows the `failures`-th recent failure."""
        exponent = max(failures - 1, 0)
        if exponent > 60:
            return self.backoff_max
        return min(self.backoff_initial * (2 ** exponent), self.backoff_max)


@dataclass(frozen=True)
class DriverSpec:
    """One driver to run."""

    name: str
    kind: str
    options: tuple[tuple[str, object], ...] = ()
    policy: RestartPolicy = field(default_factory=RestartPolicy)
    standby: bool = False  # keep a warm spare process that takes over when this one dies

    def option_args(self) -> list[str]:
        """`options` as nnrt-driver command-line arguments."""
        args: list[str] = []
        for key, value in self.options:
            for item in value if isinstance(value, tuple) else (value,):
                if item is True:
                    args.append(f"--{key}")
                elif item is False:
                    continue
                else:
                    args += [f"--{key}", _format_value(item)]
        return args

    def same_process(self, other: DriverSpec) -> bool:
        """True if both describe the same driver process (a policy or standby change needs
        no restart of the live one)."""
        return (self.name, self.kind, self.options) == (other.name, other.kind, other.options)


@dataclass(frozen=True)
class Config:
    settings: Settings
    drivers: tuple[DriverSpec, ...]
    path: Path | None = None  # None: the built-in default

    def driver(self, name: str) -> DriverSpec | None:
        return next((d for d in self.drivers if d.name == name), None)

    @property
    def source(self) -> str:
        return str(self.path) if self.path is not None else "(built-in default)"


def _format_value(value: object) -> str:
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def _number(where: str, key: str, value: object, *, integer: bool = False,
            minimum: float = 0.0, strict: bool = True) -> float | int:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ConfigError(f"{where}: {key} must be a number, not {value!r}")
    if integer and not isinstance(value, int):
        raise ConfigError(f"{where}: {key} must be an integer, not {value!r}")
    if not math.isfinite(value) or value < minimum or (strict and value == minimum):
        bound = f"> {minimum:g}" if strict else f">= {minimum:g}"
        raise ConfigError(f"{where}: {key} must be {bound}, not {value!r}")
    return int(value) if integer else float(value)


def _apply(where: str, base, table: dict, allowed: set[str]):
    """`base` (a frozen dataclass) with the keys of `table` that name its fields applied."""
    changes = {}
    types = {f.name: f.type for f in fields(base)}
    for key in table.keys() & allowed:
        value = table[key]
        if key == "restart":
            if value not in RESTART_POLICIES:
                raise ConfigError(f"{where}: restart must be one of "
                                  f"{', '.join(RESTART_POLICIES)}, not {value!r}")
            changes[key] = value
        else:
            off = key in _ZERO_MEANS_OFF
            changes[key] = _number(where, key, value, integer=types[key] == "int",
                                   minimum=0 if off else 1 if types[key] == "int" else 0.0,
                                   strict=types[key] != "int" and not off)
    return replace(base, **changes)


def _check_keys(where: str, table: object, allowed: set[str]) -> dict:
    if not isinstance(table, dict):
        raise ConfigError(f"{where} must be a table")
    unknown = sorted(set(table) - allowed)
    if unknown:
        raise ConfigError(f"{where}: unknown key(s) {', '.join(unknown)} "
                          f"(known: {', '.join(sorted(allowed))})")
    return table


_SETTING_KEYS = {f.name for f in fields(Settings)}
_POLICY_KEYS = {f.name for f in fields(RestartPolicy)}
_DRIVER_KEYS = {"kind", "options", "standby"} | _POLICY_KEYS


def _options(where: str, table: object) -> tuple[tuple[str, object], ...]:
    if not isinstance(table, dict):
        raise ConfigError(f"{where}: options must be a table (options = {{ grace = 5 }})")
    result = []
    for raw_key, value in table.items():
        key = raw_key.replace("_", "-")
        if not _OPTION.match(key):
            raise ConfigError(f"{where}: option {raw_key!r} is not an option name")
        if key in _RESERVED_OPTIONS:
            raise ConfigError(f"{where}: option {raw_key!r} is set by the device manager")
        items = value if isinstance(value, list) else [value]
        for item in items:
            if not isinstance(item, (bool, int, float, str)):
                raise ConfigError(f"{where}: option {raw_key!r} has a value of an "
                                  f"unsupported type: {item!r}")
        result.append((key, tuple(value) if isinstance(value, list) else value))
    return tuple(sorted(result))


def check_options(where: str, spec: DriverSpec) -> None:
    """Parse the command line the driver would get with nnrt-driver's own parser and checks
    (server/main.py): the host's options and those its kind declares (nnrt.hdi.plugin);
    ConfigError with what nnrt-driver would say instead of its exit 2, or why the kind's
    plugin cannot be used instead of its exit 1."""
    from nnrt.server import (
        main as driver_main,  # the driver's parser: imported when needed
    )

    args = spec.option_args()

    def refuse(message: str) -> NoReturn:
        raise ConfigError(f"{where}: options: nnrt-driver {spec.kind} refuses "
                          f"{' '.join(args)}: {message}")

    try:
        parsed = driver_main.parse_args([spec.kind, "--name", spec.name, *args], refuse)
    except PluginError as exc:
        raise ConfigError(f"{where}: kind {spec.kind!r} cannot be used: {exc}") from None
    for key, value in vars(parsed).items():
        # Drivers start in / (devmgr/supervisor.py): a relative path would not mean what the
        # configuration's author sees from wherever they stand.
        if isinstance(value, Path) and not value.is_absolute():
            refuse(f"--{key.replace('_', '-')} {value}: give an absolute path (drivers start "
                   f"in /)")


def parse_config(text: str, path: Path | None = None) -> Config:
    """The configuration in `text`; ConfigError when it is not valid."""
    where = str(path) if path is not None else "configuration"
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{where}: {exc}") from None
    _check_keys(where, data, {"devmgr", "defaults", "drivers"})
    settings = _apply(f"{where} [devmgr]",
                      Settings(), _check_keys(f"{where} [devmgr]", data.get("devmgr", {}),
                                              _SETTING_KEYS), _SETTING_KEYS)
    defaults = _apply(f"{where} [defaults]", RestartPolicy(),
                      _check_keys(f"{where} [defaults]", data.get("defaults", {}), _POLICY_KEYS),
                      _POLICY_KEYS)
    drivers_table = data.get("drivers", {})
    if not isinstance(drivers_table, dict):
        raise ConfigError(f"{where}: drivers must be tables ([drivers.cpu])")
    drivers = []
    for name, table in drivers_table.items():
        here = f"{where} [drivers.{name}]"
        if not _NAME.match(name):
            raise ConfigError(f"{here}: a driver name is letters, digits, '_', '.', '-' "
                              f"(at most 64, not starting with a punctuation mark)")
        _check_keys(here, table, _DRIVER_KEYS)
        kind = table.get("kind", name)
        if kind not in installed_kinds():
            raise ConfigError(f"{here}: unknown kind {kind!r} (installed: "
                              f"{', '.join(installed_kinds()) or 'none'}; `nnrt devices "
                              f"--kinds` lists them)")
        standby = table.get("standby", False)
        if not isinstance(standby, bool):
            raise ConfigError(f"{here}: standby must be true or false, not {standby!r}")
        spec = DriverSpec(
            name=name, kind=kind, options=_options(here, table.get("options", {})),
            policy=_apply(here, defaults, table, _POLICY_KEYS), standby=standby)
        check_options(here, spec)
        drivers.append(spec)
    return Config(settings=settings, drivers=tuple(drivers), path=path)


def load_config(path: Path | None) -> Config:
    """The configuration in the file at `path`, or the built-in default for None."""
    if path is None:
        return parse_config(DEFAULT_CONFIG_TEXT)
    try:
        text = Path(path).read_text()
    except OSError as exc:
        raise ConfigError(f"cannot read {path}: {exc.strerror or exc}") from None
    return parse_config(text, Path(path))


def default_config_path() -> Path | None:
    """The file to read when no --config is given: $NNRT_DEVMGR_CONFIG, else
    /etc/nnrt/devmgr.toml when it exists, else None (the built-in default)."""
    configured = os.environ.get(CONFIG_ENV)
    if configured:
        return Path(configured)
    return SYSTEM_CONFIG if SYSTEM_CONFIG.exists() else None
