"""What a node shows about itself, parsed: its TCP connections and the processes that own them, the processes of
the cluster's components and the systemd units they belong to, proxy rules, journal lines, audit entries.

Pure functions over the text the node prints (one shell round trip per look, see SNAPSHOT), so that every parser is
tested on recorded outputs (tests/unit/test_nodefacts.py). Identity is decided by the process, never by the name a
process gives itself: a connection belongs to a component when its owner's PID is the MainPID of the component's
systemd unit, and a component runs where a process executes the component's binary.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime

COMPONENTS = ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubelet", "kube-proxy",
              "containerd", "crio", "docker", "cri-docker")
CONTROL_PLANE = ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler")

# One round trip: established TCP connections with their processes, every process's executable and cgroup,
# and the state and main PID of each component's unit.
SNAPSHOT = (
    "ss -Htnp state established; echo '--- procs'; "
    "for p in /proc/[0-9]*; do e=$(readlink $p/exe 2>/dev/null) || continue; "
    "c=$(grep -m1 -E '^0::|name=systemd' $p/cgroup 2>/dev/null | cut -d: -f3); echo \"${p#/proc/}|$e|$c\"; done; "
    "echo '--- units'; "
    "for u in " + " ".join(COMPONENTS) + "; do "
    "echo \"$u|$(systemctl show -P MainPID $u 2>/dev/null)|$(systemctl show -P ActiveState $u 2>/dev/null)\"; done"
)


@dataclass
class Conn:
    local: str
    peer: str
    process: str  # the command name ss shows (at most 15 characters, chosen by the process), "" when none
    pids: tuple[int, ...] = ()  # the processes holding the socket

    @property
    def local_port(self) -> int:
        return int(self.local.rsplit(":", 1)[1])

    @property
    def local_ip(self) -> str:
        return _ip(self.local)

    @property
    def peer_ip(self) -> str:
        """The peer's address; an IPv4-mapped IPv6 one ([::ffff:10.0.0.1]) as plain IPv4."""
        return _ip(self.peer)

    @property
    def peer_port(self) -> int:
        return int(self.peer.rsplit(":", 1)[1])


def _ip(address: str) -> str:
    return address.rsplit(":", 1)[0].strip("[]").removeprefix("::ffff:")


def parse_ss(text: str) -> list[Conn]:
    """`ss -Htnp state established` lines: Recv-Q Send-Q Local Peer [users:(("name",pid=1,fd=3),...)]."""
    conns = []
    for line in text.splitlines():
        fields = line.split()
        if len(fields) < 4 or not fields[0].isdigit():
            continue
        name = re.search(r'\(\("([^"]+)"', line)
        pids = tuple(int(p) for p in re.findall(r"pid=(\d+)", line))
        conns.append(Conn(fields[2], fields[3], name.group(1) if name else "", pids))
    return conns


@dataclass
class Proc:
    pid: int
    exe: str  # the executable's path ("/usr/local/bin/kube-apiserver"); " (deleted)" removed
    cgroup: str  # the process's cgroup path ("/system.slice/kube-apiserver.service")

    @property
    def binary(self) -> str:
        return self.exe.rsplit("/", 1)[-1]

    @property
    def unit(self) -> str:
        """The systemd unit (service or scope) whose cgroup holds the process; "" when none."""
        return unit_of_cgroup(self.cgroup)

    def __str__(self) -> str:
        return f"pid {self.pid} {self.exe} ({self.unit or 'no unit'})"


def unit_of_cgroup(path: str) -> str:
    """The innermost .service or .scope of a cgroup path (cgroup v2, or v1's name=systemd hierarchy)."""
    for part in reversed(path.strip().split("/")):
        if part.endswith((".service", ".scope")):
            return part
    return ""


def parse_procs(text: str) -> dict[int, Proc]:
    procs = {}
    for line in text.splitlines():
        parts = line.split("|")
        if len(parts) != 3 or not parts[0].isdigit():
            continue
        procs[int(parts[0])] = Proc(int(parts[0]), parts[1].removesuffix(" (deleted)"), parts[2])
    return procs


@dataclass
class Unit:
    name: str
    main_pid: int
    state: str  # ActiveState: active, inactive, failed, activating, ...


def parse_units(text: str) -> dict[str, Unit]:
    units = {}
    for line in text.splitlines():
        parts = line.split("|")
        if len(parts) == 3 and parts[0]:
            units[parts[0]] = Unit(parts[0], int(parts[1]) if parts[1].isdigit() else 0, parts[2] or "unknown")
    return units


@dataclass
class Snapshot:
    """One look at a node: connections, processes and the components' units."""

    conns: list[Conn] = field(default_factory=list)
    procs: dict[int, Proc] = field(default_factory=dict)
    units: dict[str, Unit] = field(default_factory=dict)
    # Connections without an owner in one look and not in the same state in the next (see settled): gone, or new.
    short_lived: list[Conn] = field(default_factory=list)

    @classmethod
    def parse(cls, text: str) -> Snapshot:
        ss, _, rest = text.partition("--- procs")
        procs, _, units = rest.partition("--- units")
        return cls(parse_ss(ss), parse_procs(procs), parse_units(units))

    def unowned(self) -> list[Conn]:
        """The connections whose process this look cannot see."""
        return [c for c in self.conns if not self.owners(c)]

    def owners(self, conn: Conn) -> list[Proc]:
        return [self.procs[p] for p in conn.pids if p in self.procs]

    def component_of(self, proc: Proc) -> str | None:
        """The component whose unit's main process this is (PID and binary both match), else None."""
        for name, unit in self.units.items():
            if unit.main_pid and unit.main_pid == proc.pid and proc.binary == name:
                return name
        return None

    def conns_of(self, component: str) -> list[Conn]:
        """The connections held by the main process of the component's unit."""
        unit = self.units.get(component)
        if not unit or not unit.main_pid:
            return []
        return [c for c in self.conns if unit.main_pid in c.pids]

    def running(self, binaries=COMPONENTS) -> list[Proc]:
        """Every process executing one of the components' binaries, wherever it was started from."""
        return sorted((p for p in self.procs.values() if p.binary in binaries), key=lambda p: p.pid)


# --------------------------------------------------------------------------
# Proxy rules


def rules_mentioning(dump: str, address: str) -> list[str]:
    """The lines of an iptables-save or `nft list table` dump that mention ``address`` as a whole address
    (10.96.0.1 does not match 10.96.0.10)."""
    pattern = re.compile(rf"(^|[^0-9.]){re.escape(address)}(?![0-9])")
    return [line.strip() for line in dump.splitlines() if pattern.search(line)]


# --------------------------------------------------------------------------
# Journal and audit log


@dataclass
class JournalLine:
    when: datetime
    text: str


def parse_journal_json(text: str) -> list[JournalLine]:
    """`journalctl -o json` lines (one JSON object per line; __REALTIME_TIMESTAMP in microseconds)."""
    lines = []
    for raw in text.splitlines():
        try:
            entry = json.loads(raw)
        except ValueError:
            continue
        message = entry.get("MESSAGE")
        if isinstance(message, list):  # journald stores non-UTF-8 messages as byte lists
            message = bytes(message).decode(errors="replace")
        stamp = entry.get("__REALTIME_TIMESTAMP")
        if message is None or not str(stamp).isdigit():
            continue
        lines.append(JournalLine(datetime.fromtimestamp(int(stamp) / 1e6).astimezone(), str(message)))
    return lines


def open_watches(lines: str, since: float = 0.0) -> dict[str, dict[str, int]]:
    """From API server audit log lines (JSON, level Metadata or more), the watches still open: a ResponseStarted
    entry of verb watch whose ResponseComplete has not been logged, started after ``since`` (epoch seconds: the
    start of the API server's process, so that watches cut by a restart do not count). Per user, the count per resource.

    Self-contained (imports inside): Lab.open_watches runs this function's source on the node."""
    import json
    from datetime import datetime

    started: dict[str, tuple[str, str]] = {}
    for raw in lines.splitlines():
        try:
            entry = json.loads(raw)
        except ValueError:
            continue
        if not isinstance(entry, dict) or entry.get("verb") != "watch":
            continue
        audit_id = entry.get("auditID", "")
        if entry.get("stage") == "ResponseStarted":
            try:
                when = datetime.fromisoformat(entry.get("stageTimestamp", "").replace("Z", "+00:00")).timestamp()
            except ValueError:
                when = 0.0
            if when < since:
                continue
            ref = entry.get("objectRef") or {}
            resource = ref.get("resource", "?") + (f".{ref['apiGroup']}" if ref.get("apiGroup") else "")
            started[audit_id] = ((entry.get("user") or {}).get("username", "?"), resource)
        elif entry.get("stage") in ("ResponseComplete", "Panic"):
            started.pop(audit_id, None)
    watches: dict[str, dict[str, int]] = {}
    for user, resource in started.values():
        per_user = watches.setdefault(user, {})
        per_user[resource] = per_user.get(resource, 0) + 1
    return watches


def settled(look: Callable[[], Snapshot]) -> Snapshot:
    """A look at a node in which a connection without a visible process is one that stays so.

    `ss -p` finds a socket's process by reading /proc before it lists the sockets, so a connection opened in
    between has no process, and one whose process ended before /proc was listed has none either. When a look has
    such a connection, the node is looked at again: the second look is the answer, except that a connection without
    a process counts only when the first look saw it so too (a process that hides its sockets, not a race). The
    connections set aside — gone by the second look, or new in it without a process — are kept as ``short_lived``.
    """
    first = look()
    unseen = {(c.local, c.peer): c for c in first.unowned()}
    if not unseen:
        return first
    again = look()
    present = {(c.local, c.peer) for c in again.conns}
    keep = [c for c in again.conns if again.owners(c) or (c.local, c.peer) in unseen]
    gone = [c for key, c in unseen.items() if key not in present]
    new = [c for c in again.unowned() if (c.local, c.peer) not in unseen]
    return Snapshot(keep, again.procs, again.units, gone + new)
