""".ci/run refuses a Java older than 17 (Spark 4's minimum) with one clear line, before it
creates its virtual environment or installs anything into Python."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

CI_RUN = Path(__file__).resolve().parents[1] / ".ci" / "run"


def _fake_java(home: Path, version: str) -> None:
    (home / "bin").mkdir(parents=True)
    java = home / "bin" / "java"
    java.write_text(f'#!/bin/sh\necho \'openjdk version "{version}" 2021-01-19\' >&2\n')
    java.chmod(0o755)


@pytest.mark.parametrize("version", ["1.8.0_392", "11.0.22"])
def test_ci_run_refuses_java_older_than_17(tmp_path, version):
    checkout = tmp_path / "checkout"
    (checkout / ".ci").mkdir(parents=True)
    shutil.copy(CI_RUN, checkout / ".ci" / "run")
    _fake_java(tmp_path / "jdk", version)
    # a machine missing a Debian package would reach apt-get first: it must not touch this one
    fake_bin = tmp_path / "bin"
    fake_bin.mkdir()
    (fake_bin / "apt-get").write_text("#!/bin/sh\nexit 0\n")
    (fake_bin / "apt-get").chmod(0o755)
    env = dict(os.environ, JAVA_HOME=str(tmp_path / "jdk"),
               PATH=f"{fake_bin}{os.pathsep}{os.environ['PATH']}")
    proc = subprocess.run(["bash", str(checkout / ".ci" / "run")], env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert proc.stderr.strip().splitlines()[-1] == (
        f".ci/run: Spark 4 needs Java 17 or newer; {tmp_path}/jdk/bin/java is {version} "
        "(install openjdk-17-jdk-headless and select it with update-alternatives or JAVA_HOME)")
    assert not (checkout / "build").exists()
