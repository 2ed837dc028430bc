"""A Spark standalone cluster on one machine, its workers on hosts of their own.

    python -m hms_bench.cluster up [--workers 2] [--cores 1] [--metastore]   # prints how to use it
    python -m hms_bench.cluster status
    python -m hms_bench.cluster down [ID]

What it runs, all from the installed pyspark wheel's jars (``bin/spark-class``; no download):

* a network (``hms_bench.cluster_net``): a bridge with address ``B`` (``10.213.x.1``) and a
  network namespace per worker (``10.213.x.11``, ``.12``, ...) that reaches nothing but the
  bridge's /24;
* the **master** in the root namespace, listening on ``B`` only (its RPC port and web UI;
  ``http://B:<web port>/json/`` is its state: workers, active and completed applications);
* one **worker** per namespace (``--cores``, ``--memory``), each launching its executors in
  its namespace: a task on worker *i* runs on host ``10.213.x.(11+i)``;
* **moto's S3 server** on ``B`` (the warehouse's object store; the suite's own moto listens on
  loopback, which the namespaces cannot reach);
* with ``--metastore`` (``up``) or :meth:`SparkCluster.start_metastore`: ``hms-txn serve`` on
  ``B`` with its warehouse in a bucket of that S3 server.

A driver (a PySpark program, spark-submit, the metastore's compactor) runs in the root
namespace and binds ``B``: :meth:`SparkCluster.spark_conf` is the configuration that does so
(master, driver address, executor resources, the S3A keys, the checkout on the executors'
``PYTHONPATH``). Executors reach the driver, the metastore and S3 at ``B``; nothing listens on
another address.

Everything a cluster starts is recorded with its network and stopped by :meth:`stop` (also
after a failed start), or by ``down``; a test run killed before its teardown leaves a
network whose owner is gone, which the next cluster started on the machine removes.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from typing import Dict, List, Optional

from hms_bench.cluster_net import Network, NetworkError, registered, unavailable_reason
from hms_bench.object_store import MotoS3
from hms_bench.servers import CHECKOUT_ROOT, start_serve_process, write_site_xml

WAREHOUSE_BUCKET = "warehouse"


def spark_home() -> str:
    """The installed pyspark package: its ``jars/`` and ``bin/spark-class`` are a Spark
    distribution (found without importing pyspark: only ``spark/`` does)."""
    spec = importlib.util.find_spec("pyspark")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("pyspark is not installed: the cluster runs from its jars")
    return list(spec.submodule_search_locations)[0]


def unavailable() -> Optional[str]:
    """Why no cluster can run here (None when one can)."""
    why = unavailable_reason()
    if why:
        return why
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        return "java is not installed"
    if importlib.util.find_spec("pyspark") is None:
        return "pyspark is not installed"
    return None


def _port_on(host: str, preferred: int = 0) -> int:
    """``preferred`` if it is free on ``host``, else a free port there."""
    for port in ((preferred, 0) if preferred else (0,)):
        with socket.socket() as s:
            try:
                s.bind((host, port))
            except OSError:
                continue
            return s.getsockname()[1]
    raise RuntimeError(f"no free port on {host}")


def _get_json(url: str, timeout: float = 5.0):
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return json.loads(r.read().decode())


class SparkCluster:
    """A master, ``workers`` workers in namespaces of their own and an S3 server; see the
    module docstring. ``start()`` / ``stop()``, or a ``with`` block."""

    def __init__(self, workdir: Optional[str] = None, *, workers: int = 2, cores: int = 1,
                 memory: str = "1g", master_port: int = 0, web_port: int = 0,
                 daemon_memory: str = "256m", detached: bool = False):
        self.workdir = os.path.abspath(workdir or tempfile.mkdtemp(prefix="hms-cluster-"))
        self.n_workers, self.cores, self.memory = workers, cores, memory
        self.daemon_memory = daemon_memory
        self._ports = (master_port, web_port)
        self.net = Network(workers, detached=detached)
        self.s3: Optional[MotoS3] = None
        self.metastore_uri: Optional[str] = None
        self.master_port = self.web_port = 0
        self._children: List[subprocess.Popen] = []

    # -- addresses --------------------------------------------------------------------------

    @property
    def host(self) -> str:
        """The bridge address: where the master, S3 and drivers listen."""
        return self.net.bridge_address

    @property
    def worker_hosts(self) -> List[str]:
        return [h.address for h in self.net.hosts]

    @property
    def master_url(self) -> str:
        return f"spark://{self.host}:{self.master_port}"

    @property
    def web_url(self) -> str:
        return f"http://{self.host}:{self.web_port}"

    def master_state(self) -> dict:
        """The master's JSON state (``/json/``): workers, activeapps, completedapps, ..."""
        return _get_json(f"{self.web_url}/json/")

    # -- life cycle -------------------------------------------------------------------------

    def start(self, timeout: float = 120.0) -> "SparkCluster":
        os.makedirs(os.path.join(self.workdir, "logs"), exist_ok=True)
        self.net.create()
        try:
            self.s3 = MotoS3(os.path.join(self.workdir, "s3"), host=self.host)
            os.makedirs(self.s3.workdir, exist_ok=True)
            self.s3.start()
            self.net.record(self.s3.proc.pid, "moto")
            self.s3.create_bucket(WAREHOUSE_BUCKET)
            self._start_master(timeout)
            for i in range(self.n_workers):
                self._start_worker(i)
            self._wait(lambda: self.master_state().get("aliveworkers", 0) >= self.n_workers,
                       timeout, f"{self.n_workers} workers registered with the master")
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> List[str]:
        """Stop everything the cluster started and remove its network; -> what could not be
        undone (empty: all gone)."""
        problems = self.net.destroy()
        for p in self._children:
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                problems.append(f"process {p.pid} did not exit")
        return problems

    def __enter__(self) -> "SparkCluster":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def _spark_env(self, local_ip: str) -> Dict[str, str]:
        env = dict(os.environ)
        for k in ("SPARK_CONF_DIR", "SPARK_ENV_LOADED", "PYSPARK_SUBMIT_ARGS"):
            env.pop(k, None)
        env.update({
            "SPARK_HOME": spark_home(),
            "SPARK_LOCAL_IP": local_ip,          # the RPC and web UI addresses
            "SPARK_DAEMON_MEMORY": self.daemon_memory,
            "SPARK_LOG_DIR": os.path.join(self.workdir, "logs"),
            "PYSPARK_PYTHON": sys.executable,
            # executors (and their Python workers) import this checkout's spark/ and orc_acid/
            "PYTHONPATH": os.pathsep.join(p for p in (CHECKOUT_ROOT, env.get("PYTHONPATH"))
                                          if p),
        })
        return env

    def _launch(self, argv: List[str], env: Dict[str, str], log_name: str) -> subprocess.Popen:
        log = open(os.path.join(self.workdir, "logs", log_name), "ab")
        try:
            proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=env,
                                    cwd=self.workdir, start_new_session=True)
        finally:
            log.close()
        self._children.append(proc)
        self.net.record(proc.pid, log_name)
        return proc

    def _start_master(self, timeout: float) -> None:
        self.master_port = _port_on(self.host, self._ports[0] or 7077)
        self.web_port = _port_on(self.host, self._ports[1] or 8080)
        env = self._spark_env(self.host)
        env["SPARK_MASTER_OPTS"] = "-Dspark.master.rest.enabled=false"
        proc = self._launch([os.path.join(spark_home(), "bin", "spark-class"),
                             "org.apache.spark.deploy.master.Master", "--host", self.host,
                             "--port", str(self.master_port),
                             "--webui-port", str(self.web_port)], env, "master.log")

        def up() -> bool:
            if proc.poll() is not None:
                raise RuntimeError(f"the Spark master exited with {proc.returncode}: "
                                   f"{self.log_tail('master.log')}")
            try:
                return self.master_state().get("status") == "ALIVE"
            except OSError:
                return False
        self._wait(up, timeout, "the Spark master")

    def _start_worker(self, i: int) -> None:
        host = self.net.hosts[i].address
        work = os.path.join(self.workdir, f"worker{i}")
        os.makedirs(work, exist_ok=True)
        argv = [os.path.join(spark_home(), "bin", "spark-class"),
                "org.apache.spark.deploy.worker.Worker", "--host", host,
                "--cores", str(self.cores), "--memory", self.memory, "--work-dir", work,
                self.master_url]
        self._launch(self.net.in_namespace(i, argv), self._spark_env(host), f"worker{i}.log")

    def _wait(self, ready, timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if ready():
                return
            time.sleep(0.25)
        raise RuntimeError(f"{what}: not ready within {timeout:.0f}s; logs in "
                           f"{self.workdir}/logs")

    def log_tail(self, name: str, chars: int = 3000) -> str:
        try:
            with open(os.path.join(self.workdir, "logs", name), errors="replace") as f:
                return f.read()[-chars:]
        except OSError:
            return ""

    # -- what clients use -------------------------------------------------------------------

    def s3_options(self) -> Dict[str, str]:
        """The S3A keys (hive-site.xml names) that reach the cluster's S3 server."""
        return self.s3.options()

    def warehouse(self, path: str = "") -> str:
        return f"s3a://{WAREHOUSE_BUCKET}/{path}".rstrip("/")

    def spark_conf(self, *, executor_memory: str = "512m") -> Dict[str, str]:
        """The settings of a driver in the root namespace using this cluster: it binds the
        bridge address (executors reach it there), its executors get one per worker, and
        the S3A keys reach the cluster's S3 server (``spark.hadoop.*``)."""
        conf = {
            "spark.master": self.master_url,
            "spark.driver.host": self.host,
            "spark.driver.bindAddress": self.host,
            "spark.executor.memory": executor_memory,
            "spark.executor.cores": str(self.cores),
            "spark.cores.max": str(self.cores * self.n_workers),
            "spark.pyspark.python": sys.executable,
            "spark.executorEnv.PYTHONPATH": CHECKOUT_ROOT,
        }
        conf.update({f"spark.hadoop.{k}": v for k, v in self.s3_options().items()})
        return conf

    def executor_pids(self, worker: int) -> List[int]:
        """The executor JVMs running on worker ``worker`` (in its namespace)."""
        out = []
        for pid in self.net.namespace_pids(worker):
            try:
                with open(f"/proc/{pid}/cmdline", "rb") as f:
                    cmd = f.read()
            except OSError:
                continue
            if b"CoarseGrainedExecutorBackend" in cmd:
                out.append(pid)
        return out

    def start_metastore(self, conf: Optional[Dict[str, str]] = None) -> str:
        """``hms-txn serve`` on the bridge address, warehouse in the S3 bucket; -> its URI.
        (Tests usually run their metastore in-process instead, bound the same way.)"""
        data = os.path.join(self.workdir, "metastore")
        os.makedirs(data, exist_ok=True)
        site = {"javax.jdo.option.ConnectionURL": f"jdbc:sqlite:{data}/metastore.sqlite",
                "hive.metastore.warehouse.dir": self.warehouse("hive"),
                **self.s3_options(), **(conf or {})}
        path = write_site_xml(os.path.join(data, "hive-site.xml"), site)
        log_path = os.path.join(self.workdir, "logs", "metastore.log")
        with open(log_path, "ab") as log:
            proc, port = start_serve_process(path, data, log, log_path, host=self.host,
                                             env=self._spark_env(self.host), new_session=True)
        self._children.append(proc)
        self.net.record(proc.pid, "metastore")
        self.metastore_uri = f"thrift://{self.host}:{port}"
        return self.metastore_uri

    def describe(self) -> dict:
        return {"id": self.net.id, "workdir": self.workdir, "master": self.master_url,
                "master_web": self.web_url, "workers": self.worker_hosts,
                "s3_endpoint": self.s3.endpoint if self.s3 else None,
                "warehouse": self.warehouse(), "metastore": self.metastore_uri}

    def write_spark_defaults(self) -> str:
        """``spark-defaults.conf`` for ``spark-submit --properties-file``."""
        conf = self.spark_conf()
        if self.metastore_uri:
            conf["spark.hadoop.hive.metastore.uris"] = self.metastore_uri
        path = os.path.join(self.workdir, "spark-defaults.conf")
        with open(path, "w") as f:
            f.writelines(f"{k} {v}\n" for k, v in sorted(conf.items()))
        return path


# -- the command ----------------------------------------------------------------------------

def _up(args) -> int:
    why = unavailable()
    if why:
        print(f"hms_bench.cluster: cannot start a cluster here: {why}", file=sys.stderr)
        return 2
    cluster = SparkCluster(args.workdir, workers=args.workers, cores=args.cores,
                           memory=args.memory, master_port=7077, web_port=8080, detached=True)
    cluster.start()
    if args.metastore:
        try:
            cluster.start_metastore()
        except BaseException:
            cluster.stop()
            raise
    defaults = cluster.write_spark_defaults()
    info = {**cluster.describe(), "spark_defaults": defaults}
    with open(os.path.join(cluster.workdir, "cluster.json"), "w") as f:
        json.dump(info, f, indent=1)
    print(json.dumps(info, indent=1))
    print(f"\nspark-submit --properties-file {defaults} app.py   # a driver on the cluster\n"
          f"python -m hms_bench.cluster down {cluster.net.id}      # stops it", file=sys.stderr)
    return 0


def _down(args) -> int:
    nets = registered()
    targets = [n for n in nets if n.id in args.ids] if args.ids else \
        [n for n in nets if n.detached]
    if args.ids and len(targets) != len(args.ids):
        print(f"no such cluster: {sorted(set(args.ids) - {n.id for n in targets})}",
              file=sys.stderr)
        return 1
    code = 0
    for net in targets:
        problems = net.destroy()
        print(f"{net.id}: {'stopped' if not problems else '; '.join(problems)}")
        code = code or (1 if problems else 0)
    return code


def _status(_args) -> int:
    for net in registered():
        alive = sum(p.alive() for p in net.processes)
        owner = "detached" if net.detached else f"owner pid {net.owner.pid if net.owner else '?'}"
        print(f"{net.id}  {net.subnet}  {len(net.hosts)} hosts  {alive}/{len(net.processes)} "
              f"processes alive  {owner}")
    return 0


def main(argv: Optional[List[str]] = None) -> int:
    p = argparse.ArgumentParser(prog="python -m hms_bench.cluster", description=__doc__.split(
        "\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    up = sub.add_parser("up", help="start a cluster (runs until `down`)")
    up.add_argument("--workers", type=int, default=2)
    up.add_argument("--cores", type=int, default=1, help="cores per worker")
    up.add_argument("--memory", default="1g", help="executor memory per worker")
    up.add_argument("--workdir", help="logs, worker directories, S3 data (default: a temp dir)")
    up.add_argument("--metastore", action="store_true",
                    help="also run hms-txn serve on the bridge, warehouse on the S3 server")
    up.set_defaults(run=_up)
    down = sub.add_parser("down", help="stop clusters (default: every one `up` started)")
    down.add_argument("ids", nargs="*")
    down.set_defaults(run=_down)
    st = sub.add_parser("status", help="list the clusters of this machine")
    st.set_defaults(run=_status)
    args = p.parse_args(argv)
    try:
        return args.run(args)
    except (NetworkError, RuntimeError) as err:
        print(f"hms_bench.cluster: {err}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
