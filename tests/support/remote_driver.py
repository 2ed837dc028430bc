"""A Spark driver in a process of its own that runs the functions a test sends it.

A test process holds at most one SparkContext, and the suite's local session
(``tests/spark/conftest.py``) usually holds it already; a driver on the test cluster
(``tests/support/cluster.py``) therefore runs here, as ``python -m
tests.support.remote_driver``: it builds a SparkSession from the configuration in
``HMS_REMOTE_DRIVER_CONF`` (JSON), registers ``hive_acid`` and listens on loopback with the
key in ``HMS_REMOTE_DRIVER_KEY``. The test sends ``fn`` and its arguments (cloudpickle, by
value) and gets back ``fn(spark, *args)`` or the exception's type, message and traceback.
Each connection is served by a thread of its own, so a test can run a job and act while it
runs (kill an executor, then look at the files).

This is test machinery: anyone holding the key runs code in this process, which listens on
127.0.0.1 only.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import traceback
from multiprocessing.connection import Listener

CONF_ENV, KEY_ENV = "HMS_REMOTE_DRIVER_CONF", "HMS_REMOTE_DRIVER_KEY"


def _serve(conn, spark, stop: threading.Event) -> None:
    from pyspark import cloudpickle
    try:
        while True:
            try:
                payload = conn.recv_bytes()
            except (EOFError, OSError):
                return
            fn, args = cloudpickle.loads(payload)
            if fn == "stop":
                conn.send(("ok", None))
                stop.set()
                return
            try:
                # this thread's JVM thread (py4j pins one per Python thread) looks data
                # sources up in its active session, which a new thread may not have
                spark._jvm.org.apache.spark.sql.SparkSession.setActiveSession(
                    spark._jsparkSession)
                reply = ("ok", fn(spark, *args))
            except BaseException as err:       # noqa: BLE001 - reported to the test
                reply = ("error", (type(err).__name__, str(err), traceback.format_exc()))
            conn.send(reply)
    finally:
        conn.close()


def main(port_file: str) -> int:
    conf = json.loads(os.environ[CONF_ENV])
    from pyspark.sql import SparkSession
    from spark import hive_acid

    builder = SparkSession.builder.appName(conf.pop("spark.app.name", "hms-remote-driver"))
    for k, v in conf.items():
        builder = builder.config(k, v)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    hive_acid.register(spark)
    listener = Listener(("127.0.0.1", 0), authkey=bytes.fromhex(os.environ[KEY_ENV]))
    with open(port_file + ".tmp", "w") as f:
        f.write(str(listener.address[1]))
    os.replace(port_file + ".tmp", port_file)
    stop = threading.Event()

    def accept() -> None:
        while not stop.is_set():
            try:
                conn = listener.accept()
            except Exception:          # a failed handshake: the next one
                continue
            threading.Thread(target=_serve, args=(conn, spark, stop), daemon=True).start()

    threading.Thread(target=accept, daemon=True).start()
    stop.wait()
    hive_acid.shutdown()
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
