"""Fixtures of the orc_acid tests: Hive-written ORC files and a JVM with Hive's storage-api."""

from __future__ import annotations

import glob
import os
import shutil
from pathlib import Path

import pytest

from tests.support.requirements import require

REPO_ROOT = Path(__file__).resolve().parents[2]
MISSING_FIXTURES = ("Hive-written fixtures not found: set HIVE_WRITTEN_FIXTURES or place "
                    "shared/ beside the checkout; they are never vendored")


@pytest.fixture(scope="session")
def hive_fixtures_dir() -> Path:
    env = os.environ.get("HIVE_WRITTEN_FIXTURES")
    candidates = [Path(env)] if env else []
    candidates.append(REPO_ROOT.parent / "shared" / "fixtures" / "hive-written")
    for c in candidates:
        if (c / "streaming.orc").is_file():
            return c
    require(False, MISSING_FIXTURES)


@pytest.fixture
def place_fixture(hive_fixtures_dir, tmp_path):
    """Copy a Hive-written file into a fresh table dir: place_fixture(name, 'delta_1_2/bucket_0')."""
    table = tmp_path / "table"

    def place(name: str, rel: str) -> Path:
        dest = table / rel
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(hive_fixtures_dir / name, dest)
        os.chmod(dest, 0o644)
        return table

    return place


@pytest.fixture(scope="module")
def storage_api_jvm():
    """A py4j gateway to a plain JVM whose classpath is PySpark's hive-storage-api jar.

    No SparkContext: ``java -cp py4j.jar:hive-storage-api.jar:commons-lang.jar``. Returns
    the gateway; ``gateway.jvm.org.apache.hadoop.hive.common`` holds the classes."""
    import pyspark
    from py4j.java_gateway import GatewayParameters, JavaGateway, launch_gateway

    jars = Path(pyspark.__file__).parent / "jars"

    def one(pattern: str) -> str:
        found = sorted(glob.glob(str(jars / pattern)))
        if not found:
            pytest.fail(f"PySpark jar {pattern} not found in {jars}")
        return found[0]

    classpath = os.pathsep.join([one("hive-storage-api-*.jar"), one("commons-lang-2*.jar")])
    java = shutil.which("java") or "/usr/bin/java"
    port = launch_gateway(classpath=classpath, jarpath=one("py4j-*.jar"), die_on_exit=True,
                          java_path=java)
    gateway = JavaGateway(gateway_parameters=GatewayParameters(port=port, auto_convert=True))
    try:
        yield gateway
    finally:
        gateway.shutdown()
