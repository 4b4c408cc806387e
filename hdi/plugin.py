"""Drivers as plugins: how `nnrt-driver KIND` finds the device it serves.

A driver package declares one `DriverKind` and names it in the entry-point group
`nnrt.drivers` of its distribution, the entry's name being the kind:

    [project.entry-points."nnrt.drivers"]
    template = "nnrt_template_driver.kind:KIND"

Ours (cpu, gpu, accel) register themselves that way in nnrt's own pyproject.toml. For
development and tests without installing anything, `$NNRT_DRIVER_PLUGINS` adds kinds
(`kind=module:attr[,kind2=module:attr]`; one of ours named there is replaced).

A kind's module is imported when the kind is first asked for (`nnrt-driver KIND`, the device
manager's configuration, `nnrt devices --kinds`), so it must stay light: import the device
itself inside `create`. A plugin that cannot be imported, is not a `DriverKind`, or is
declared twice is reported once (a log line naming the entry point) and fails only itself.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass
from importlib import metadata

from nnrt.hdi.device import Device

log = logging.getLogger(__name__)

ENTRY_POINT_GROUP = "nnrt.drivers"
PLUGINS_ENV = "NNRT_DRIVER_PLUGINS"
_KIND_NAME = re.compile(r"^[a-z][a-z0-9_-]{0,31}$")
_TARGET = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_][\w.]*$")


class DeviceUnavailable(RuntimeError):
    """The device a driver was asked to serve does not exist here (no OpenCL GPU, ...); the
    message says what was found and how to choose. `nnrt-driver` exits 1 with it."""


class PluginError(RuntimeError):
    """A driver kind that cannot be used: unknown, or its plugin is broken (the message
    names the entry point and why)."""


def _no_options(group: argparse._ArgumentGroup) -> None:
    """A driver without options of its own."""


def _no_check(options: argparse.Namespace) -> None:
    """Every value argparse accepted is fine."""


@dataclass(frozen=True)
class DriverKind:
    """What a driver package gives the host.

    - `name`: the kind (`nnrt-driver NAME`), the same as its entry point's name;
    - `summary`: one line for `nnrt devices --kinds` and `nnrt-driver --help`;
    - `create(options)`: the device, from the driver's own options (an argparse Namespace
      holding only what `add_options` declared); raise DeviceUnavailable when the hardware
      is not there (exit 1, the message logged);
    - `add_options(group)`: declare the driver's command-line options on an argparse
      argument group (shown by `nnrt-driver NAME --help`; the device manager's `options`
      table is checked against them);
    - `check_options(options)`: range checks argparse cannot express; raise ValueError with
      the message (exit 2, or a configuration error in the device manager).
    """

    name: str
    summary: str
    create: Callable[[argparse.Namespace], Device]
    add_options: Callable[[argparse._ArgumentGroup], None] = _no_options
    check_options: Callable[[argparse.Namespace], None] = _no_check


@dataclass
class KindEntry:
    """One kind found installed: where it comes from and, once loaded, its DriverKind."""

    name: str
    target: str  # "module:attr"
    origin: str  # the distribution ("nnrt 0.1.0") or "$NNRT_DRIVER_PLUGINS"
    problem: str | None = None  # known before loading: a bad name, two declarations
    _loaded: DriverKind | None = None
    _error: str | None = None

    @property
    def where(self) -> str:
        return f"entry point {self.name!r} = {self.target!r} ({self.origin})"

    def load(self) -> DriverKind:
        """The DriverKind; PluginError (logged once) when the plugin cannot be used."""
        with _lock:
            if self._loaded is None and self._error is None:
                try:
                    self._loaded = self._import()
                except PluginError as exc:
                    self._error = str(exc)
                    log.error("driver plugin unusable: %s", exc)
            if self._error is not None:
                raise PluginError(self._error)
            return self._loaded

    def _import(self) -> DriverKind:
        if self.problem is not None:
            raise PluginError(f"{self.where}: {self.problem}")
        module_name, _, attr = self.target.partition(":")
        try:
            value: object = importlib.import_module(module_name)
            for part in attr.split("."):
                value = getattr(value, part)
        except Exception as exc:  # any failure of a foreign module is that plugin's own
            raise PluginError(f"{self.where} cannot be loaded: "
                              f"{type(exc).__name__}: {exc}") from None
        if not isinstance(value, DriverKind):
            raise PluginError(f"{self.where} is a {type(value).__name__}, not a "
                              f"nnrt.hdi.plugin.DriverKind")
        if value.name != self.name:
            raise PluginError(f"{self.where} declares the kind {value.name!r}: the entry "
                              f"point's name must be the kind")
        return value


_lock = threading.RLock()
_found: dict[str, dict[str, KindEntry]] = {}  # by the $NNRT_DRIVER_PLUGINS value in force


def _entry_points() -> dict[str, KindEntry]:
    # Every distribution on the path, not importlib.metadata's first one per name: a stale
    # `nnrt.egg-info` left in a source tree (the current directory comes first on sys.path)
    # would otherwise hide the installed metadata and with it every kind of ours.
    found: dict[str, KindEntry] = {}
    for dist in metadata.distributions():
        origin = f"{dist.name} {dist.version}"
        for point in dist.entry_points.select(group=ENTRY_POINT_GROUP):
            previous = found.get(point.name)
            if previous is None:
                entry = found[point.name] = KindEntry(point.name, point.value, origin)
                if not _KIND_NAME.match(point.name):
                    entry.problem = ("a kind's name is a lowercase letter, then lowercase "
                                     "letters, digits, '_' or '-' (at most 32)")
            elif previous.origin.split()[0] != dist.name and previous.target != point.value:
                previous.problem = (f"also declared by {origin} as {point.value!r}: "
                                    f"uninstall one of them")
    return found


def _from_environment(text: str) -> dict[str, KindEntry]:
    found: dict[str, KindEntry] = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        name, _, target = item.partition("=")
        name, target = name.strip(), target.strip()
        if not _KIND_NAME.match(name) or not _TARGET.match(target):
            log.error("$%s: %r is not kind=module:attr: ignored", PLUGINS_ENV, item)
            continue
        found[name] = KindEntry(name, target, f"${PLUGINS_ENV}")
    return found


def installed_kinds() -> dict[str, KindEntry]:
    """Every kind found, by name (sorted): the `nnrt.drivers` entry points, then those of
    $NNRT_DRIVER_PLUGINS (which replace an entry point of the same name). Not loaded yet."""
    extra = os.environ.get(PLUGINS_ENV, "")
    with _lock:
        kinds = _found.get(extra)
        if kinds is None:
            kinds = _entry_points()
            for name, entry in _from_environment(extra).items():
                if name in kinds:
                    log.info("driver kind %r from $%s (%s) replaces %s", name, PLUGINS_ENV,
                             entry.target, kinds[name].where)
                kinds[name] = entry
            kinds = _found[extra] = dict(sorted(kinds.items()))
        return kinds


def load_kind(name: str) -> DriverKind:
    """The DriverKind of an installed kind; PluginError when there is none or it is broken."""
    entry = installed_kinds().get(name)
    if entry is None:
        raise PluginError(f"no driver kind {name!r} is installed (installed: "
                          f"{', '.join(installed_kinds()) or 'none'})")
    return entry.load()


def forget_kinds() -> None:
    """Look the kinds up again at the next call (after a package was installed or removed
    in this process's lifetime: tests)."""
    with _lock:
        _found.clear()
    importlib.invalidate_caches()
