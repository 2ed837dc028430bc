"""Compile and run the decoding harness (``DecodeMessages.java``, ``ControlMessages.java``
next to this file) against Hive 2.3's classes in PySpark's jars."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from typing import Any, Iterable

from hms_bench.javahms import pyspark_jars
from tests.support.requirements import require

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCES = ("DecodeMessages.java", "ControlMessages.java")
# What javac needs of the jars (the whole directory is slow to index on a small machine);
# the JVM then runs with all of them, as Hive needs HiveConf, Hadoop and logging.
COMPILE_JARS = ("hive-metastore-", "libthrift-", "jackson-databind-", "jackson-core-",
                "jackson-annotations-")


def require_java() -> str:
    """PySpark's jar directory; skips (fails under CI=true) without Java 17 or the jars."""
    require(shutil.which("javac") is not None and shutil.which("java") is not None,
            "Java 17 (java and javac) is not installed")
    try:
        jars = pyspark_jars()
    except (ImportError, RuntimeError) as err:
        require(False, f"PySpark's jars are not available: {err}")
    require(any(n.startswith("hive-metastore-2.3") for n in os.listdir(jars)),
            "PySpark's jars have no hive-metastore-2.3 jar")
    return jars


def compile_harness(out_dir: str) -> str:
    jars = require_java()
    names = sorted(os.listdir(jars))
    classpath = [os.path.join(jars, n) for n in names if n.startswith(COMPILE_JARS)]
    subprocess.run(["javac", "-nowarn", "-encoding", "UTF-8", "-cp", os.pathsep.join(classpath),
                    "-d", out_dir, *(os.path.join(HERE, s) for s in SOURCES)],
                   check=True, capture_output=True, text=True, timeout=600)
    return out_dir


def run_harness(classes: str, lines: Iterable[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Decode the input lines in one JVM; the results by ``id``."""
    jars = require_java()
    text = "".join(json.dumps(line) + "\n" for line in lines)
    proc = subprocess.run(["java", "-cp", f"{classes}{os.pathsep}{jars}/*", "DecodeMessages"],
                          input=text, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-4000:]
    results = [json.loads(out) for out in proc.stdout.splitlines() if out.strip()]
    return {r["id"]: r for r in results}
