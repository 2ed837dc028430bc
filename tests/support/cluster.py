"""The Spark cluster of the tests (``hms_bench.cluster``), a metastore its hosts reach, and
drivers on it in processes of their own (``remote_driver``).

A test module that needs the cluster starts one for itself through the module-scoped
``cluster`` fixture of ``tests/spark/conftest.py`` (a master, two workers with one core each,
in their own network namespaces, and an S3 server on the bridge: :func:`start_cluster`),
stopped at the module's end; at most two modules of the suite do, to keep its time.
"""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
import time
from concurrent.futures import Future, ThreadPoolExecutor
from multiprocessing.connection import Client
from typing import Any, Callable, Dict, Optional

from tests.support.requirements import require

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def start_cluster(workdir: str):
    """A started ``SparkCluster`` (2 workers, 1 core each); a skip where no cluster can run
    (a failure in CI)."""
    from hms_bench.cluster import SparkCluster, unavailable
    why = unavailable()
    require(why is None, f"no Spark cluster here: {why}")
    return SparkCluster(workdir, workers=2, cores=1, memory="1g").start()


def cluster_metastore(cluster, root: str, conf: Optional[Dict[str, str]] = None):
    """An in-process metastore listening on the cluster's bridge address (so that its hosts
    reach it), warehouse in the cluster's S3 bucket."""
    from tests.support.servers import InProcessServer
    os.makedirs(root, exist_ok=True)
    overrides = {"javax.jdo.option.ConnectionURL": f"jdbc:sqlite:{root}/metastore.sqlite",
                 "hive.metastore.warehouse.dir": cluster.warehouse(os.path.basename(root)),
                 **cluster.s3_options(), **(conf or {})}
    return InProcessServer(os.path.join(root, "data"), overrides, host=cluster.host)


class RemoteError(AssertionError):
    """The function failed in the driver: its type, message and traceback there."""

    def __init__(self, kind: str, message: str, tb: str):
        super().__init__(f"{kind}: {message}\n--- in the driver:\n{tb}")
        self.kind, self.message = kind, message


class RemoteDriver:
    """A Spark driver process (``python -m tests.support.remote_driver``) with ``conf``;
    :meth:`call` runs ``fn(spark, *args)`` there."""

    def __init__(self, conf: Dict[str, str], workdir: str):
        os.makedirs(workdir, exist_ok=True)
        self.conf = dict(conf)
        self.workdir = workdir
        self.key = secrets.token_bytes(16)
        self.log_path = os.path.join(workdir, "driver.log")
        self.proc: Optional[subprocess.Popen] = None
        self.port = 0
        self._pool = ThreadPoolExecutor(4, thread_name_prefix="remote-driver-call")

    def start(self, timeout: float = 240.0) -> "RemoteDriver":
        import json
        from tests.support.remote_driver import CONF_ENV, KEY_ENV
        port_file = os.path.join(self.workdir, "driver.port")
        if os.path.exists(port_file):
            os.unlink(port_file)
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(
            p for p in (REPO_ROOT, os.environ.get("PYTHONPATH")) if p))
        env[CONF_ENV] = json.dumps(self.conf)
        env[KEY_ENV] = self.key.hex()
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "tests.support.remote_driver", port_file],
                stdout=log, stderr=subprocess.STDOUT, cwd=self.workdir, env=env,
                start_new_session=True)
        deadline = time.monotonic() + timeout
        while not os.path.exists(port_file):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.kill()
                raise RuntimeError(f"the remote driver did not start: {self.log_tail()}")
            time.sleep(0.2)
        with open(port_file) as f:
            self.port = int(f.read())
        return self

    @property
    def pid(self) -> int:
        return self.proc.pid

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def call(self, fn: Callable, *args) -> Any:
        from pyspark import cloudpickle
        module = sys.modules.get(getattr(fn, "__module__", ""), None)
        if module is not None and module.__name__ not in ("builtins", "__main__"):
            cloudpickle.register_pickle_by_value(module)   # the driver need not import it
        payload = cloudpickle.dumps((fn, args))
        conn = Client(("127.0.0.1", self.port), authkey=self.key)
        try:
            conn.send_bytes(payload)
            try:
                status, value = conn.recv()
            except EOFError:
                raise RemoteError("EOFError", "the driver process ended during the call",
                                  self.log_tail()) from None
        finally:
            conn.close()
        if status == "error":
            raise RemoteError(*value)
        return value

    def submit(self, fn: Callable, *args) -> Future:
        """:meth:`call` in a thread of this process; the future holds its result."""
        return self._pool.submit(self.call, fn, *args)

    def kill(self) -> None:
        """SIGKILL the driver process (the test's 'killed driver'); its Spark application
        then ends on the master."""
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, 9)
            self.proc.wait(30)

    def stop(self, timeout: float = 60.0) -> None:
        if self.alive():
            try:
                self.call("stop")
                self.proc.wait(timeout)
            except Exception:
                pass
        self.kill()
        self._pool.shutdown(wait=False, cancel_futures=True)

    def log_tail(self, chars: int = 4000) -> str:
        try:
            with open(self.log_path, errors="replace") as f:
                return f.read()[-chars:]
        except OSError:
            return ""


def poll_until(predicate, timeout: float, what: str, every: float = 0.2, job=None):
    """``predicate()``'s first true value, polled to a deadline; a ``job`` (a future: a call
    running meanwhile) that ends first ends the wait with what it returned or raised."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if job is not None and job.done():
            raise AssertionError(f"the call running meanwhile ended ({job.result()!r}) "
                                 f"before: {what}")
        value = predicate()
        if value:
            return value
        time.sleep(every)
    raise AssertionError(f"not within {timeout:.0f}s: {what}")


# -- independent observations ----------------------------------------------------------------

def snapshot_rows(client, full_name: str, fs_options: Dict[str, str], txn_list=None
                  ) -> list:
    """The rows of an ACID table in a reader's snapshot (``txn_list``: a ValidTxnList; a
    fresh one by default), read from its files with ``orc_acid`` in this process: the
    columns in table order, then the partition values; sorted."""
    import pyarrow as pa
    from hms_txn.clients import snapshots
    from hms_txn.wire.thrift_gen.hive_metastore import ttypes as T
    from orc_acid import fs as afs
    from orc_acid.hive_types import arrow_type
    from orc_acid.reader import read_table

    db, name = full_name.split(".")
    if txn_list is None:
        txn_list = snapshots.valid_txn_list(client.get_open_txns())
    resp = client.get_valid_write_ids(T.GetValidWriteIdsRequest(
        fullTableNames=[full_name], validTxnList=str(txn_list)))
    wids = snapshots.valid_write_id_list(resp.tblValidWriteIds[0])
    table = client.get_table_acid_aware(db, name)
    schema = pa.schema([(c.name, arrow_type(c.type)) for c in table.sd.cols])
    if table.partitionKeys:
        places = [(tuple(p.values), p.sd.location)
                  for p in client.get_partitions(db, name, -1)]
    else:
        places = [((), table.sd.location)]
    rows = []
    for values, location in places:
        fs, path = afs.filesystem_for(location, fs_options)
        data = read_table(path, wids, valid_txns=txn_list, schema=schema, filesystem=fs)
        rows += [tuple(r.values()) + values for r in data.to_pylist()]
    return sorted(rows)


def listening_addresses(pid: int) -> set:
    """(address, port) of the IPv4 TCP sockets process ``pid`` listens on, from /proc (what
    the kernel says, not what the process reports)."""
    inodes = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    found = set()
    with open(f"/proc/{pid}/net/tcp") as f:
        next(f)
        for line in f:
            cols = line.split()
            local, state, inode = cols[1], cols[3], cols[9]
            if state == "0A" and inode in inodes:          # TCP_LISTEN
                hex_ip, hex_port = local.split(":")
                ip = ".".join(str(int(hex_ip[i:i + 2], 16)) for i in (6, 4, 2, 0))
                found.add((ip, int(hex_port, 16)))
    return found
