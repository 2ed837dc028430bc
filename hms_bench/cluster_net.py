"""Hosts of a test cluster on one machine: Linux network namespaces on a private bridge.

A :class:`Network` of ``n`` hosts is a bridge in the root namespace (address ``.1`` of the
network's /24) and, per host, a network namespace joined to the bridge by a veth pair
(address ``.11``, ``.12``, ...). A namespace has its loopback and that one interface and no
route beyond the /24: a process in it can reach the other hosts and the bridge address (the
root namespace: driver, metastore, object store), and nothing else. Nothing here configures
forwarding, NAT or a default route, so no packet leaves the /24.

Names and addresses never collide between two runs on one machine:

* a network has a random id (6 hex digits); its bridge is ``hx<id>b``, its veth ends
  ``hx<id>h<i>`` (bridge side) and ``hx<id>n<i>`` (namespace side), its namespaces
  ``hms-<id>-h<i>`` (interface names stay within Linux's 15 characters);
* its /24 is chosen in ``POOL`` (10.213.0.0/16, private) among those no route or address of
  the machine overlaps and no other live network of ours uses, under a file lock, so two
  runs starting together cannot take the same one.

Every network is recorded in a state file (``REGISTRY/<id>.json``: its links, namespaces,
the processes started for it with their start times, and the process that owns it) from
before its first link exists until after its last is gone. :meth:`Network.destroy` kills
every process in its namespaces and the recorded ones (by process group, checked by start
time so that a reused pid is never hit), deletes the namespaces and links and the state
file; it runs whatever failed before. A network whose owner died without destroying it (a
test run killed with SIGKILL) is destroyed by the next :meth:`Network.create` on the
machine; one made by ``python -m hms_bench.cluster up`` is ``detached`` (its owner exits
at once) and lives until ``down``.

Root (CAP_NET_ADMIN and CAP_SYS_ADMIN) and iproute2's ``ip`` are required.
"""

from __future__ import annotations

import contextlib
import fcntl
import ipaddress
import json
import os
import random
import shutil
import signal
import subprocess
import time
from dataclasses import asdict, dataclass, field
from typing import Iterator

REGISTRY = os.environ.get("HMS_CLUSTER_REGISTRY", "/run/hms-txn-cluster")
POOL = ipaddress.ip_network("10.213.0.0/16")
HOST_OFFSET = 11          # host i has address .(11 + i); the bridge has .1


class NetworkError(RuntimeError):
    """A network could not be created (no root, no ``ip``, no free /24...)."""


def unavailable_reason() -> str | None:
    """Why this machine cannot make networks (None when it can)."""
    if shutil.which("ip") is None:
        return "iproute2's ip command is not installed (Debian package iproute2)"
    if os.geteuid() != 0:
        return "creating network namespaces needs root"
    return None


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    proc = subprocess.run(["ip", *args], capture_output=True, text=True)
    if check and proc.returncode != 0:
        raise NetworkError(f"ip {' '.join(args)}: {proc.stderr.strip() or proc.returncode}")
    return proc


def process_start_time(pid: int) -> int | None:
    """The start time of a running process (clock ticks since boot; /proc/<pid>/stat field
    22), or None when there is no such process or it has exited (a zombie): with the pid it
    names one process for ever."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return None if fields[0] in ("Z", "X") else int(fields[19])
    except (OSError, IndexError, ValueError):
        return None


@dataclass
class Proc:
    """A process started for a network, named so that it is never confused with a later
    process that reuses its pid."""
    pid: int
    start: int | None
    what: str = ""

    @classmethod
    def of(cls, pid: int, what: str = "") -> "Proc":
        return cls(pid, process_start_time(pid), what)

    def alive(self) -> bool:
        return self.start is not None and process_start_time(self.pid) == self.start


@dataclass
class Host:
    index: int
    namespace: str
    address: str
    host_if: str           # veth end on the bridge (root namespace)
    ns_if: str             # veth end in the namespace


@dataclass
class Network:
    """A bridge and ``n_hosts`` namespaces; see the module docstring."""
    n_hosts: int
    id: str = ""
    subnet: str = ""
    detached: bool = False
    owner: Proc | None = None
    hosts: list[Host] = field(default_factory=list)
    processes: list[Proc] = field(default_factory=list)

    # -- names --------------------------------------------------------------------------

    @property
    def bridge(self) -> str:
        return f"hx{self.id}b"

    @property
    def bridge_address(self) -> str:
        return str(ipaddress.ip_network(self.subnet)[1])

    @property
    def prefix_len(self) -> int:
        return ipaddress.ip_network(self.subnet).prefixlen

    @property
    def state_file(self) -> str:
        return os.path.join(REGISTRY, f"{self.id}.json")

    # -- life cycle ---------------------------------------------------------------------

    def create(self, subnet: str | None = None) -> "Network":
        """Choose the id and the /24 (or take ``subnet``), record the network, then make
        its links and namespaces; on any failure everything made so far is removed."""
        why = unavailable_reason()
        if why:
            raise NetworkError(why)
        os.makedirs(REGISTRY, exist_ok=True)
        with _registry_lock():
            sweep_orphans()
            taken = {n.subnet for n in registered()}
            self.id = _new_id()
            self.subnet = subnet or _free_subnet(taken)
            net = ipaddress.ip_network(self.subnet)
            if net.num_addresses < HOST_OFFSET + self.n_hosts + 2:
                raise NetworkError(f"{self.subnet} is too small for {self.n_hosts} hosts")
            self.owner = Proc.of(os.getpid(), "owner")
            self.hosts = [Host(i, f"hms-{self.id}-h{i}", str(net[HOST_OFFSET + i]),
                               f"hx{self.id}h{i}", f"hx{self.id}n{i}")
                          for i in range(self.n_hosts)]
            self.save()
        try:
            self._make_links()
        except BaseException:
            self.destroy()
            raise
        return self

    def _make_links(self) -> None:
        plen = self.prefix_len
        _ip("link", "add", self.bridge, "type", "bridge")
        _ip("addr", "add", f"{self.bridge_address}/{plen}", "dev", self.bridge)
        _ip("link", "set", self.bridge, "up")
        for h in self.hosts:
            _ip("netns", "add", h.namespace)
            _ip("link", "add", h.host_if, "type", "veth", "peer", "name", h.ns_if,
                "netns", h.namespace)
            _ip("link", "set", h.host_if, "master", self.bridge)
            _ip("link", "set", h.host_if, "up")
            _ip("-n", h.namespace, "link", "set", "lo", "up")
            _ip("-n", h.namespace, "addr", "add", f"{h.address}/{plen}", "dev", h.ns_if)
            _ip("-n", h.namespace, "link", "set", h.ns_if, "up")

    def record(self, pid: int, what: str) -> None:
        """Remember a process started for the network (``destroy`` stops it)."""
        self.processes.append(Proc.of(pid, what))
        self.save()

    def save(self) -> None:
        tmp = self.state_file + ".tmp"
        with open(tmp, "w") as f:
            json.dump(asdict(self), f, indent=1)
        os.replace(tmp, self.state_file)

    def in_namespace(self, index: int, argv: list[str]) -> list[str]:
        """``argv`` run inside host ``index``'s namespace."""
        return ["ip", "netns", "exec", self.hosts[index].namespace, *argv]

    def namespace_pids(self, index: int) -> list[int]:
        proc = _ip("netns", "pids", self.hosts[index].namespace, check=False)
        return [int(p) for p in proc.stdout.split() if p.strip().isdigit()]

    def destroy(self, grace_s: float = 10.0) -> list[str]:
        """Stop the network's processes, delete its namespaces, links and state file.
        Idempotent and best effort: returns what could not be undone (empty: all gone)."""
        problems: list[str] = []
        victims = [p for p in self.processes if p.alive()]
        for i in range(len(self.hosts)):
            if _namespace_exists(self.hosts[i].namespace):
                victims += [Proc.of(pid, "in namespace") for pid in self.namespace_pids(i)]
        _stop_processes(victims, grace_s)
        for h in self.hosts:
            if _namespace_exists(h.namespace):
                leftover = self.namespace_pids(h.index)
                if leftover:
                    problems.append(f"processes {leftover} still in {h.namespace}")
                r = _ip("netns", "delete", h.namespace, check=False)
                if r.returncode != 0:
                    problems.append(r.stderr.strip())
            if _link_exists(h.host_if):      # normally gone with its peer's namespace
                _ip("link", "delete", h.host_if, check=False)
        if self.id and _link_exists(self.bridge):
            r = _ip("link", "delete", self.bridge, check=False)
            if r.returncode != 0:
                problems.append(r.stderr.strip())
        if not problems and self.id:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.state_file)
        return problems

    @classmethod
    def load(cls, path: str) -> "Network":
        with open(path) as f:
            doc = json.load(f)
        owner = Proc(**doc.pop("owner")) if doc.get("owner") else None
        hosts = [Host(**h) for h in doc.pop("hosts", [])]
        procs = [Proc(**p) for p in doc.pop("processes", [])]
        return cls(**doc, owner=owner, hosts=hosts, processes=procs)


def registered() -> list[Network]:
    """The networks recorded on this machine (live or orphaned)."""
    out = []
    try:
        names = sorted(os.listdir(REGISTRY))
    except FileNotFoundError:
        return []
    for name in names:
        if name.endswith(".json"):
            try:
                out.append(Network.load(os.path.join(REGISTRY, name)))
            except (OSError, ValueError, TypeError):
                continue
    return out


def sweep_orphans() -> list[str]:
    """Destroy the networks whose owner process is gone (not detached ones); -> their ids."""
    gone = []
    for net in registered():
        if not net.detached and (net.owner is None or not net.owner.alive()):
            net.destroy()
            gone.append(net.id)
    return gone


@contextlib.contextmanager
def _registry_lock() -> Iterator[None]:
    with open(os.path.join(REGISTRY, ".lock"), "w") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def _new_id() -> str:
    existing = {n.id for n in registered()}
    while True:
        candidate = f"{random.getrandbits(24):06x}"
        if candidate not in existing and not _link_exists(f"hx{candidate}b"):
            return candidate


def _machine_networks() -> list[ipaddress.IPv4Network]:
    """Every IPv4 network a route or an address of the machine covers."""
    nets = []
    for args in (("-4", "route", "show", "table", "all"), ("-4", "-o", "addr", "show")):
        for line in _ip(*args, check=False).stdout.splitlines():
            for word in line.split():
                if word[0].isdigit() and ("/" in word or word.count(".") == 3):
                    with contextlib.suppress(ValueError):
                        nets.append(ipaddress.ip_network(word, strict=False))
    return nets


def _free_subnet(taken: set[str]) -> str:
    used = _machine_networks() + [ipaddress.ip_network(s) for s in taken if s]
    candidates = list(POOL.subnets(new_prefix=24))
    random.shuffle(candidates)
    for net in candidates:
        if not any(net.overlaps(u) for u in used):
            return str(net)
    raise NetworkError(f"no free /24 left in {POOL}")


def _namespace_exists(name: str) -> bool:
    return os.path.exists(os.path.join("/run/netns", name))


def _link_exists(name: str) -> bool:
    return os.path.exists(os.path.join("/sys/class/net", name))


def _stop_processes(procs: list[Proc], grace_s: float) -> None:
    """SIGTERM to each process's group (its own session: everything it started), then
    SIGKILL to what is left after ``grace_s``."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for p in procs:
            if p.alive():
                _signal(p.pid, sig)
        deadline = time.monotonic() + (grace_s if sig == signal.SIGTERM else 5.0)
        while time.monotonic() < deadline and any(p.alive() for p in procs):
            time.sleep(0.1)


def _signal(pid: int, sig: int) -> None:
    try:
        pgid = os.getpgid(pid)
    except ProcessLookupError:
        return
    try:
        # its own group (started with start_new_session): the whole group; else the one
        if pgid == pid:
            os.killpg(pgid, sig)
        else:
            os.kill(pid, sig)
    except ProcessLookupError:
        pass
