"""The test cluster's hosts (``hms_bench.cluster_net``): namespaces that reach the bridge and
nothing else, removed whole after a failed creation and after their owner died."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time

import pytest

from hms_bench import cluster_net
from hms_bench.cluster_net import Network, NetworkError, registered, unavailable_reason
from tests.support.requirements import require

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.fixture(autouse=True)
def _root_and_ip():
    why = unavailable_reason()
    require(why is None, f"no network namespaces here: {why}")


def leftovers(net: Network) -> list[str]:
    """What of ``net`` still exists: namespaces, links, its state file."""
    out = [n for n in os.listdir("/run/netns") if n.startswith(f"hms-{net.id}-")] \
        if os.path.isdir("/run/netns") else []
    out += [n for n in os.listdir("/sys/class/net") if n.startswith(f"hx{net.id}")]
    if os.path.exists(net.state_file):
        out.append(net.state_file)
    return out


def test_a_host_reaches_the_bridge_and_has_no_route_beyond_it():
    net = Network(1).create()
    try:
        routes = subprocess.run(["ip", "-n", net.hosts[0].namespace, "-4", "route"],
                                capture_output=True, text=True, check=True).stdout
        assert routes.split()[0] == net.subnet and "default" not in routes
        with socket.socket() as listener:
            listener.bind((net.bridge_address, 0))
            listener.listen()
            port = listener.getsockname()[1]
            probe = (f"import socket; s = socket.create_connection(({net.bridge_address!r}, "
                     f"{port}), timeout=10); print(s.getsockname()[0])")
            out = subprocess.run(net.in_namespace(0, [sys.executable, "-c", probe]),
                                 capture_output=True, text=True, timeout=60)
        assert out.stdout.strip() == net.hosts[0].address, out.stderr
    finally:
        assert net.destroy() == []
    assert leftovers(net) == []


def test_a_failed_creation_leaves_nothing(monkeypatch):
    real = cluster_net._ip

    def second_veth_fails(*args, check=True):
        if args[:2] == ("link", "add") and "veth" in args and args[2].endswith("h1"):
            raise NetworkError("injected failure")
        return real(*args, check=check)
    monkeypatch.setattr(cluster_net, "_ip", second_veth_fails)
    net = Network(2)
    with pytest.raises(NetworkError, match="injected"):
        net.create()
    assert net.id and leftovers(net) == []


ORPHAN = """
import subprocess, sys, time
from hms_bench.cluster_net import Network
net = Network(1).create()
p = subprocess.Popen(net.in_namespace(0, [sys.executable, "-c", "import time; time.sleep(600)"]),
                     start_new_session=True)
net.record(p.pid, "sleeper")
print(net.id, p.pid, flush=True)
time.sleep(600)
"""


def test_a_network_whose_owner_died_is_removed_by_the_next_one():
    owner = subprocess.Popen([sys.executable, "-c", ORPHAN], stdout=subprocess.PIPE, text=True,
                             cwd=REPO, env=dict(os.environ, PYTHONPATH=REPO))
    net_id, sleeper = owner.stdout.readline().split()
    owner.send_signal(signal.SIGKILL)           # no teardown at all
    owner.wait(30)
    orphan = next(n for n in registered() if n.id == net_id)
    assert leftovers(orphan) and os.path.exists(f"/proc/{sleeper}")
    net = Network(1).create()                   # sweeps what died with its owner
    try:
        assert leftovers(orphan) == []
        deadline = time.monotonic() + 30
        while cluster_net.process_start_time(int(sleeper)) is not None:
            assert time.monotonic() < deadline, "the orphan's process is still running"
            time.sleep(0.1)
    finally:
        assert net.destroy() == []
