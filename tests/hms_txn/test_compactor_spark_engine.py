"""The worker's side of engine=SPARK without a cluster: what it runs (``spark-submit``'s
arguments from hive-site.xml) and how it reads the end of the application, with a stand-in
``spark-submit`` that follows ``spark/compaction_job.py``'s contract (the job directory as
last argument; ``status.json``, then ``result.pickle``). The real application runs on the
test cluster: tests/spark/test_cluster_compaction.py."""

from __future__ import annotations

import os
import stat
import sys
import time
import zipfile

import pytest

from hms_txn.common.config import Config, ConfigError
from hms_txn.service.compactor.spark_engine import (SparkApplication, SparkJobFailed,
                                                    SparkJobStopped, SparkSettings)


def fake_submit(tmp_path, body: str) -> str:
    """An executable standing in for spark-submit: ``body`` runs with ``job`` = the job
    directory (its last argument) and ``argv``."""
    path = tmp_path / "spark-submit"
    path.write_text(f"#!{sys.executable}\nimport json, os, pickle, sys, time\n"
                    f"argv = sys.argv[1:]\njob = argv[-1]\n{body}\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return str(path)


def settings(submit: str, **extra) -> SparkSettings:
    return SparkSettings(Config({"hms_txn.compactor.engine": "SPARK",
                                 "spark.master": "spark://m:7077",
                                 "hms_txn.compactor.spark.submit": submit,
                                 "fs.s3a.endpoint": "http://s3:9000", **extra}))


def test_the_application_gets_hive_site_s_spark_keys(tmp_path):
    s = settings(fake_submit(tmp_path, ""), **{"spark.executor.memory": "3g",
                                                "hive.compactor.job.queue": "compactions",
                                                "spark.hadoop.fs.s3a.secret.key": " s3cr=t\\"})
    job = tmp_path / "job"
    job.mkdir()
    argv = s.argv("hms-txn compaction 7", str(job))
    assert argv[:7] == [s.submit, "--master", "spark://m:7077", "--deploy-mode", "client",
                        "--name", "hms-txn compaction 7"]
    # the keys are in a properties file (on top of spark-defaults.conf), never on the
    # command line, where every user of the host could read a secret
    props = argv[argv.index("--properties-file") + 1]
    assert "--load-spark-defaults" in argv and not any("s3cr" in a for a in argv)
    with open(props) as f:
        lines = f.read().splitlines()
    assert {"spark.executor.memory 3g", "spark.yarn.queue compactions",
            f"spark.pyspark.python {sys.executable}",
            "spark.hadoop.fs.s3a.secret.key \\ s3cr=t\\\\"} <= set(lines)
    assert not any(line.startswith("spark.master") for line in lines)
    # executors get orc_acid from --py-files; the program is spark/compaction_job.py
    py_files = argv[argv.index("--py-files") + 1]
    assert "orc_acid/compaction.py" in zipfile.ZipFile(py_files).namelist()
    assert argv[-2].endswith(os.path.join("spark", "compaction_job.py")) and argv[-1] == str(job)
    assert s.fs_options == {"fs.s3a.endpoint": "http://s3:9000"}


def test_a_spark_worker_without_spark_submit_stops_start_up(tmp_path):
    with pytest.raises(ConfigError, match="hms_txn.compactor.spark.submit"):
        settings(str(tmp_path / "missing"))


def test_results_come_back_by_request(tmp_path):
    s = settings(fake_submit(tmp_path, """
with open(os.path.join(job, "job.pickle"), "rb") as f:
    items = pickle.load(f)["tasks"]
with open(os.path.join(job, "status.json"), "w") as f:
    json.dump({"app_id": "app-1"}, f)
with open(os.path.join(job, "result.pickle"), "wb") as f:
    pickle.dump({"results": [(rid, f"done {task}") for rid, _, task in items]}, f)
"""))
    app = SparkApplication(s, "n", [(1, "s3a://b/t/p=1", "t0"), (1, "s3a://b/t/p=1", "t1"),
                                    (2, "s3a://b/t/p=2", "t0")])
    seen = []
    assert app.run(seen.append, lambda: False, poll_s=0.05) == \
        {1: ["done t0", "done t1"], 2: ["done t0"]}
    assert seen == ["app-1"] and not os.path.exists(app.job_dir)


def test_an_application_that_fails_says_why_and_keeps_its_log(tmp_path):
    s = settings(fake_submit(tmp_path, """
with open(os.path.join(job, "status.json"), "w") as f:
    json.dump({"app_id": "app-2"}, f)
print("INFO starting")
print("ERROR Master removed our application: KILLED", flush=True)
sys.exit(1)
"""))
    app = SparkApplication(s, "n", [(1, "/t", "t0")])
    with pytest.raises(SparkJobFailed, match=r"'app-2' ended with exit status 1 .*"
                                             r"Master removed our application: KILLED"):
        app.run(lambda _: None, lambda: False, poll_s=0.05)
    assert os.path.exists(app.log_path)


def test_a_stop_kills_the_application_s_processes(tmp_path):
    pid_file = tmp_path / "child.pid"
    s = settings(fake_submit(tmp_path, f"""
import subprocess
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
open({str(pid_file)!r}, "w").write(str(child.pid))
time.sleep(600)
"""))
    app = SparkApplication(s, "n", [(1, "/t", "t0")])
    started = time.monotonic()
    with pytest.raises(SparkJobStopped):
        app.run(lambda _: None, lambda: pid_file.exists() and pid_file.read_text() != "",
                poll_s=0.05)
    assert time.monotonic() - started < 60
    child = int(pid_file.read_text())
    deadline = time.monotonic() + 30          # the driver's own children go too
    while not _gone(child) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _gone(child)


def _gone(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] in ("Z", "X")
    except OSError:
        return True
