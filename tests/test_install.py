"""Issue 30: the package installed as the README says (``pip install -e .``, no extras) into a
fresh virtual environment works: every module of the product imports with the core
dependencies alone, every ``hms-txn`` command answers ``--help``, and the README's first
steps run -- ``hms-txn serve`` (its printed address, the warning of an open bind), the
transaction and compaction commands against it, ``hms-txn serve --conf
conf/hive-site.xml`` with SASL on and ``hms-txn delegation-token`` (then renew, cancel).

Nothing here runs this checkout's modules directly: the commands are the console script
of the new environment, started without PYTHONPATH from a directory of their own. pip reuses
its cache (wheels of the core dependencies), so a second run takes about a minute."""

from __future__ import annotations

import os
import re
import signal
import stat
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
COMMANDS = ["serve", "upgrade-schema", "show-transactions", "show-locks", "abort-txns",
            "compact", "show-compactions", "delegation-token", "renew-delegation-token",
            "cancel-delegation-token", "cat", "head", "bench"]     # bench: hms_bench's plugin command

# Imports every module of the product (not ``spark``, the [spark] extra's, nor ``hms_bench``,
# the benchmarks, nor the Iceberg REST catalog's modules, the [rest] extra's) and prints the
# ones that fail: what a core dependency must cover.
IMPORT_ALL = """
import importlib, pkgutil
REST_EXTRA = ("hms_txn.rest", "hms_txn.service.iceberg.")
for top in ("hms_txn", "orc_acid"):
    for m in pkgutil.walk_packages(importlib.import_module(top).__path__, top + "."):
        if not m.name.endswith(".__main__") and not m.name.startswith(REST_EXTRA):
            try:
                importlib.import_module(m.name)
            except Exception as e:
                print(f"{m.name}: {type(e).__name__}: {e}")
"""


class Venv:
    def __init__(self, path: Path):
        self.bin = path / "bin"
        self.env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
        self.env.update(VIRTUAL_ENV=str(path), PATH=f"{self.bin}{os.pathsep}{os.environ['PATH']}")

    def start(self, cwd: Path, *args: str) -> subprocess.Popen:
        return subprocess.Popen([str(self.bin / "hms-txn"), *args], cwd=cwd, env=self.env,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def run(self, cwd: Path, *commands: list[str]) -> list[subprocess.CompletedProcess]:
        """Run ``hms-txn <command>`` for each command at once (the machine may be slow)."""
        procs = [(c, self.start(cwd, *c)) for c in commands]
        done = []
        for c, p in procs:
            out, err = p.communicate(timeout=300)
            done.append(subprocess.CompletedProcess(c, p.returncode, out, err))
        return done


@pytest.fixture(scope="module")
def venv(tmp_path_factory) -> Venv:
    path = tmp_path_factory.mktemp("install") / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(path)], check=True, timeout=300)
    # The README's command; the checkout read-only as far as this test is concerned
    # (egg-info, build/ are ignored files).
    pip = subprocess.run([str(path / "bin" / "python"), "-m", "pip", "install", "-q",
                          "--disable-pip-version-check", "-e", str(ROOT)],
                         cwd=tmp_path_factory.getbasetemp(), capture_output=True, text=True,
                         timeout=900)
    assert pip.returncode == 0, pip.stdout + pip.stderr
    return Venv(path)


def test_no_extras_were_installed(venv):
    listed = subprocess.run([str(venv.bin / "python"), "-m", "pip", "list", "--format=freeze",
                             "--disable-pip-version-check"], env=venv.env, capture_output=True,
                            text=True, timeout=300, check=True).stdout
    installed = {line.split("==")[0].lower().replace("_", "-") for line in listed.split()}
    assert not installed & {"pyspark", "pandas", "pytest", "matplotlib", "hmsclient", "pyorc"}
    assert {"thrift", "thrift-sasl", "pure-sasl", "sqlalchemy", "pyarrow"} <= installed


def test_every_module_imports_with_the_core_dependencies(venv, tmp_path):
    proc = subprocess.run([str(venv.bin / "python"), "-c", IMPORT_ALL], cwd=tmp_path,
                          env=venv.env, capture_output=True, text=True, timeout=300)
    assert (proc.returncode, proc.stdout) == (0, ""), proc.stdout + proc.stderr


def test_every_command_answers_help(venv, tmp_path):
    [top, version, *each] = venv.run(tmp_path, ["--help"], ["--version"],
                                     *([c, "--help"] for c in COMMANDS))
    assert (top.returncode, top.stderr) == (0, ""), top.stderr
    listed = re.findall(r"^    (\S+)", top.stdout.split("COMMAND", 2)[2].split("options:")[0],
                        re.M)
    assert listed == COMMANDS
    assert (version.returncode, version.stdout) == (0, "hms-txn 0.1.0\n"), version.stderr
    for command, proc in zip(COMMANDS, each):
        assert (proc.returncode, proc.stderr) == (0, ""), (command, proc.stderr)
        assert proc.stdout.startswith(f"usage: hms-txn {command} "), (command, proc.stdout)


class Served:
    """``hms-txn serve ... --port 0`` in the background: its process, port and URI."""

    def __init__(self, venv: Venv, cwd: Path, *args: str):
        self.proc = venv.start(cwd, "serve", "--port", "0", *args)
        self.line = self.proc.stdout.readline().strip()
        assert self.line.startswith("hms-txn listening on thrift://"), (
            self.line + self.stop()[1])
        self.port = int(self.line.rsplit(":", 1)[1])
        self.uri = f"thrift://127.0.0.1:{self.port}"

    def stop(self) -> tuple[int, str]:
        self.proc.send_signal(signal.SIGTERM)
        _, err = self.proc.communicate(timeout=60)
        return self.proc.returncode, err


def test_readme_first_steps(venv, tmp_path):
    # pip install -e . && hms-txn serve: embedded SQLite, ./metastore_data, every interface
    server = Served(venv, tmp_path)
    try:
        assert server.line == f"hms-txn listening on thrift://0.0.0.0:{server.port}"
        assert (tmp_path / "metastore_data" / "metastore.sqlite").is_file()
        # two transactions, opened as a client would (the installed client factory)
        opened = subprocess.run(
            [str(venv.bin / "python"), "-c",
             "from hms_txn.wire.client import connect\n"
             "from hms_txn.wire.thrift_gen.hive_metastore import ttypes as t\n"
             f"c = connect('{server.uri}')\n"
             "r = c.open_txns(t.OpenTxnRequest(num_txns=2, user='alice', hostname='h'))\n"
             "sd = t.StorageDescriptor(cols=[t.FieldSchema('id', 'int', '')], serdeInfo="
             "t.SerDeInfo(parameters={}), parameters={})\n"
             "c.create_table(t.Table(dbName='default', tableName='t', sd=sd, partitionKeys=[],"
             " parameters={'transactional': 'true'}))\n"
             "print(r.txn_ids)"],
            cwd=tmp_path, env=venv.env, capture_output=True, text=True, timeout=300)
        assert opened.stdout == "[1, 2]\n", opened.stderr
        uri = ["--uri", server.uri]
        locks, queued = venv.run(tmp_path, ["show-locks", *uri], ["compact", *uri, "default.t"])
        [aborted] = venv.run(tmp_path, ["abort-txns", *uri, "1", "99"])
        txns, compactions = venv.run(tmp_path, ["show-transactions", *uri],
                                     ["show-compactions", *uri])
    finally:
        status, log = server.stop()
    assert status == 0, log
    assert "reachable from other hosts, with neither SASL" in log
    for proc in (locks, compactions, queued, txns):
        assert (proc.returncode, proc.stderr) == (0, ""), (proc.args, proc.stderr)
    assert (aborted.returncode, aborted.stderr) == (
        1, "hms-txn: 1 of 2 transaction(s) not aborted: 99 unknown\n"), aborted.stderr
    assert locks.stdout.rstrip().endswith("0 lock(s)")
    assert re.findall(r"^(\d+) +default +t +MAJOR +initiated ", compactions.stdout, re.M) == ["1"]
    assert compactions.stdout.rstrip().endswith("1 compaction(s)")
    assert queued.stdout == "MAJOR compaction 1 of default.t: initiated\n"
    assert re.findall(r"^(\d+) +(\S.*?)\s*$", aborted.stdout, re.M) == [
        ("1", "aborted"), ("99", "unknown (No such transaction txnid:99)")]
    assert re.findall(r"^(\d+) +(OPEN|ABORTED) +.* alice ", txns.stdout, re.M) == [
        ("1", "ABORTED"), ("2", "OPEN")]
    assert txns.stdout.rstrip().endswith("2 transaction(s); high water mark 2")


def test_readme_conf_and_delegation_token(venv, tmp_path):
    # hms-txn serve --conf conf/hive-site.xml, with SASL on (README, "Point clients at it":
    # hms-txn delegation-token --user U --password-file F --output T)
    (tmp_path / "pw").write_text("s3cret\n")
    server = Served(venv, tmp_path, "--conf", str(ROOT / "conf" / "hive-site.xml"),
                    "--hiveconf", "hive.metastore.sasl.enabled=true",
                    "--hiveconf", "hive.metastore.authentication.config.username=alice",
                    "--hiveconf", "hive.metastore.authentication.config.password=s3cret")
    auth = ["--uri", server.uri, "--user", "alice", "--password-file", "pw"]
    try:
        [token, txns] = venv.run(tmp_path, ["delegation-token", *auth, "--output", "T"],
                                 ["show-transactions", *auth])
        [renewed] = venv.run(tmp_path, ["renew-delegation-token", *auth, "--token-file", "T"])
        [cancelled] = venv.run(tmp_path, ["cancel-delegation-token", *auth, "--token-file", "T"])
        [gone] = venv.run(tmp_path, ["renew-delegation-token", *auth, "--token-file", "T"])
    finally:
        status, log = server.stop()
    assert status == 0, log
    assert "reachable from other hosts" not in log           # SASL is on
    assert (tmp_path / "metastore_data" / "metastore.sqlite").is_file()   # the conf's URL
    for proc in (token, txns, renewed, cancelled):
        assert (proc.returncode, proc.stderr) == (0, ""), (proc.args, proc.stderr)
    assert re.fullmatch(
        r"wrote delegation token 1 of alice \(renewer alice, valid at most until \S+\) to T\n"
        r"use it with HADOOP_TOKEN_FILE_LOCATION=T and hive.metastore.sasl.enabled=true\n",
        token.stdout), token.stdout
    assert stat.S_IMODE((tmp_path / "T").stat().st_mode) == 0o600
    assert txns.stdout.rstrip().endswith("0 transaction(s); high water mark 0")
    assert re.fullmatch(r"delegation token 1 of alice: renewed until \S+\n", renewed.stdout)
    assert cancelled.stdout == "delegation token 1 of alice: cancelled\n"
    assert gone.returncode == 1                    # ran, but the answer is a failure
    assert "not known to this metastore" in gone.stdout + gone.stderr

