"""Compaction as a Spark application (``hms_txn.compactor.engine=SPARK``): the worker's side.

The worker (``worker.py``) claims requests as with the LOCAL engine -- the same claim Hive's
external workers use -- opens their compaction transactions, takes the snapshots and plans
them with ``orc_acid.compaction``: ``begin_staging`` creates the output directories and
``plan_tasks`` cuts each request into one task per (partition, bucket id). Then, instead of
running the tasks in its own thread, it hands them to :class:`SparkApplication`:

* one Spark application per claimed batch (several requests of one table and type,
  ``hms_txn.compactor.spark.requests.per.application``): an application's start costs tens
  of seconds, a compaction of one partition often less;
* started with ``spark-submit`` in client mode as the worker's child process, running
  ``spark/compaction_job.py`` (the project's only pyspark code stays in ``spark/``; the
  metastore never imports pyspark, it runs a program); ``--py-files`` ships ``orc_acid``
  (pure Python) to the executors, which merge with it;
* master and resources from hive-site.xml under Spark's own names: ``spark.master`` and
  every other ``spark.*`` key, passed as ``--conf`` (Hive on Spark's rule);
  ``hive.compactor.job.queue`` becomes ``spark.yarn.queue``;
* the tasks go in as a pickle in a private directory of the worker (mode 0700) and the
  results come back the same way (see ``spark/compaction_job.py`` for why files and a
  child process rather than a call back to the metastore); the application id is
  recorded in the request (``hadoop_job_id``) as soon as the driver reports it.

The worker commits a request's compaction transaction only when every task it planned for
it has a result (``orc_acid.compaction.publish_compaction`` refuses otherwise). A failed or
killed application, a driver that dies, a worker told to stop or a request revoked
meanwhile (``hive.compactor.worker.timeout``) all end the same way: the application is
killed if it still runs, the transactions are aborted and the requests are marked failed
(or re-queued on shutdown), as Hive's Worker does with a failed MR job; whatever the tasks
wrote is an aborted ``_vC`` directory, invisible to readers and removed by the Cleaner. A
failed request is retried as in Hive: the Initiator queues the partition again on its next
check until ``hive.compactor.initiator.failed.compacts.threshold`` failures in a row.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import logging
import os
import pickle
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import zipfile
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import orc_acid

from hms_txn.common.config import Config, ConfigError

log = logging.getLogger(__name__)

JOB, STATUS, RESULT = "job.pickle", "status.json", "result.pickle"   # spark/compaction_job.py
LOG_FILE = "spark-submit.log"


class SparkJobFailed(Exception):
    """The application ended without results for every task (failed, killed, or its driver
    died); the message names the application and the tail of its log."""


class SparkJobStopped(Exception):
    """The application was killed because the worker is stopping or lost its requests."""


def _spark_submit(config: Config) -> str:
    configured = config["hms_txn.compactor.spark.submit"]
    candidates = [configured] if configured else []
    if not configured:
        if os.environ.get("SPARK_HOME"):
            candidates.append(os.path.join(os.environ["SPARK_HOME"], "bin", "spark-submit"))
        spec = importlib.util.find_spec("pyspark")     # locates the package, imports nothing
        if spec is not None and spec.submodule_search_locations:
            candidates.append(os.path.join(list(spec.submodule_search_locations)[0], "bin",
                                           "spark-submit"))
    for path in candidates:
        if os.access(path, os.X_OK):
            return path
    raise ConfigError(f"{config.source}: hms_txn.compactor.engine=SPARK needs spark-submit: "
                      f"{'not executable: ' + configured if configured else 'none found'}; "
                      f"set hms_txn.compactor.spark.submit or SPARK_HOME, or install pyspark "
                      f"(pip install 'hms-txn[spark]')")


def _job_program() -> str:
    """``spark/compaction_job.py`` of this installation (found, not imported)."""
    spec = importlib.util.find_spec("spark")
    if spec is not None and spec.submodule_search_locations:
        path = os.path.join(list(spec.submodule_search_locations)[0], "compaction_job.py")
        if os.path.exists(path):
            return path
    raise ConfigError("hms_txn.compactor.engine=SPARK: spark/compaction_job.py is not "
                      "installed beside hms_txn")


_zip_lock = threading.Lock()
_zips: Dict[str, str] = {}


def orc_acid_zip() -> str:
    """A zip of the ``orc_acid`` package (``--py-files``), built once per content."""
    root = os.path.dirname(os.path.abspath(orc_acid.__file__))
    names = sorted(os.path.relpath(os.path.join(d, n), root)
                   for d, _, files in os.walk(root) for n in files if n.endswith(".py"))
    digest = hashlib.sha256()
    for n in names:
        with open(os.path.join(root, n), "rb") as f:
            digest.update(n.encode() + b"\0" + f.read())
    key = digest.hexdigest()[:16]
    with _zip_lock:
        path = _zips.get(key)
        if path and os.path.exists(path):
            return path
        path = os.path.join(tempfile.mkdtemp(prefix="hms-compactor-pyfiles-"),
                            f"orc_acid-{key}.zip")
        with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
            for n in names:
                z.write(os.path.join(root, n), f"orc_acid/{n}")
        _zips[key] = path
        return path


class SparkSettings:
    """What a compaction application is started with, from hive-site.xml; raises
    ConfigError (start-up stops) when SPARK cannot work."""

    def __init__(self, config: Config):
        self.master = config["spark.master"].strip()
        if not self.master:
            raise ConfigError(f"{config.source}: hms_txn.compactor.engine=SPARK needs "
                              f"spark.master (e.g. spark://host:7077 or yarn)")
        self.submit = _spark_submit(config)
        self.program = _job_program()
        self.conf = {k: v for k, v in config.raw.items()
                     if k.startswith("spark.") and k != "spark.master"}
        queue = config["hive.compactor.job.queue"]
        if queue and "spark.yarn.queue" not in self.conf:
            self.conf["spark.yarn.queue"] = queue
        self.conf.setdefault("spark.pyspark.python", sys.executable)
        self.conf.setdefault("spark.pyspark.driver.python", sys.executable)
        self.per_application = config["hms_txn.compactor.spark.requests.per.application"]
        self.fs_options = config.filesystem_options()

    def argv(self, name: str, job_dir: str) -> List[str]:
        """spark-submit's arguments. The ``spark.*`` keys go in a properties file of the
        job directory, not on the command line (which every user of the host can read:
        ``spark.hadoop.fs.s3a.secret.key`` and the like), loaded on top of
        ``spark-defaults.conf``."""
        props = os.path.join(job_dir, "spark.properties")
        with open(props, "w") as f:
            f.writelines(f"{k} {_escape(v)}\n" for k, v in sorted(self.conf.items()))
        return [self.submit, "--master", self.master, "--deploy-mode", "client",
                "--name", name, "--properties-file", props, "--load-spark-defaults",
                "--py-files", orc_acid_zip(), self.program, job_dir]


def _escape(value: str) -> str:
    """A value as a Java properties file reads it back."""
    out = value.replace("\\", "\\\\").replace("\n", "\\n").replace("\r", "\\r")
    return "\\" + out if out[:1] in (" ", "\t") else out


Item = Tuple[int, str, object]      # (request id, table/partition location, CompactionTask)


class SparkApplication:
    """One run of ``spark/compaction_job.py`` over ``items``."""

    def __init__(self, settings: SparkSettings, name: str, items: Sequence[Item]):
        self.settings = settings
        self.name = name
        self.items = list(items)
        self.app_id: Optional[str] = None
        self.job_dir = tempfile.mkdtemp(prefix="hms-compaction-")     # mode 0700
        self.log_path = os.path.join(self.job_dir, LOG_FILE)

    def run(self, on_app_id: Callable[[str], None], should_stop: Callable[[], bool],
            poll_s: float = 0.5) -> Dict[int, list]:
        """Run the application to its end; -> request id -> its tasks' results. Raises
        SparkJobFailed, or SparkJobStopped when ``should_stop()`` said so (then the
        application is killed first). The job directory is removed after success; after a
        failure its log stays (the job and the properties, which hold credentials, go)."""
        with open(os.path.join(self.job_dir, JOB), "wb") as f:
            pickle.dump({"tasks": self.items, "fs_options": self.settings.fs_options}, f)
        env = dict(os.environ)
        root = os.path.dirname(os.path.dirname(os.path.abspath(orc_acid.__file__)))
        env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
        with open(self.log_path, "ab") as log_file:
            proc = subprocess.Popen(self.settings.argv(self.name, self.job_dir),
                                    stdout=log_file, stderr=subprocess.STDOUT, env=env,
                                    cwd=self.job_dir, start_new_session=True)
        log.info("compaction application %r started (spark-submit pid %d, %d tasks, log %s)",
                 self.name, proc.pid, len(self.items), self.log_path)
        try:
            while proc.poll() is None:
                self._read_app_id(on_app_id)
                if should_stop():
                    raise SparkJobStopped(f"application {self.app_id or self.name} killed: "
                                          f"the worker stopped or lost its requests")
                time.sleep(poll_s)
        finally:
            if proc.poll() is None:
                _kill_group(proc)
            for secret in (JOB, "spark.properties"):     # they hold the fs.* / spark keys
                try:
                    os.unlink(os.path.join(self.job_dir, secret))
                except FileNotFoundError:
                    pass
        self._read_app_id(on_app_id)
        results = self._results(proc.returncode)
        shutil.rmtree(self.job_dir, ignore_errors=True)
        return results

    def _read_app_id(self, on_app_id) -> None:
        if self.app_id is not None:
            return
        try:
            with open(os.path.join(self.job_dir, STATUS)) as f:
                self.app_id = json.load(f)["app_id"]
        except (OSError, ValueError, KeyError):
            return
        on_app_id(self.app_id)

    def _results(self, code: int) -> Dict[int, list]:
        path = os.path.join(self.job_dir, RESULT)
        if code != 0 or not os.path.exists(path):
            raise SparkJobFailed(
                f"Spark application {self.app_id or self.name!r} ended with exit status "
                f"{code} and no results (log {self.log_path}): {self.log_tail()}")
        with open(path, "rb") as f:
            done = pickle.load(f)["results"]
        out: Dict[int, list] = {}
        for request_id, result in done:
            out.setdefault(request_id, []).append(result)
        return out

    def log_tail(self, lines: int = 6) -> str:
        """The log's last error lines (Spark's and Python's), else its last lines."""
        try:
            with open(self.log_path, errors="replace") as f:
                text = [ln.rstrip() for ln in f.readlines() if ln.strip()]
        except OSError:
            return "(no log)"
        errors = [ln for ln in text if not ln.startswith(("\t", " ")) and
                  any(w in ln for w in ("ERROR", "Error", "Exception", "killed"))]
        return " | ".join((errors or text)[-lines:])[-2000:]


def _kill_group(proc: subprocess.Popen, grace_s: float = 15.0) -> None:
    """End spark-submit and everything it started (its driver JVM, the Python driver):
    SIGTERM lets the driver stop its SparkContext, which ends the application on the
    cluster; SIGKILL after ``grace_s``."""
    for sig, wait in ((signal.SIGTERM, grace_s), (signal.SIGKILL, 10.0)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(wait)
            return
        except subprocess.TimeoutExpired:
            continue
