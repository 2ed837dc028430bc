"""hive_acid's JVM reader (``spark/jvm/AcidOrcSource.java``) and insert writer
(``spark/jvm/AcidOrcSink.java``) in the session's JVM.

Each is a Spark DataSource V2 source written in Java. There is no jar to build or to
install: the driver compiles each source with Janino, the Java compiler Spark itself ships
(and uses for its whole-stage code generation), in its own JVM through py4j, once per JVM;
writes the classes into a jar in a temporary directory; adds that jar to the context class
loader of the driver (so ``spark.read.format(<class>)`` finds it) and, per SparkContext,
with ``SparkContext.addJar`` to the executors (which fetch it from the driver, as they fetch
any ``--jars``).

The compiled classes live in a package named after the SHA-1 of the source
(``hmstxn.spark.h<sha1>``): a JVM that already holds an older build (another version of
this module in the same driver) can never hand out a class that speaks another plan format.

:func:`reader_class` returns the class to read with (:func:`sink_class` the one to insert
with), or raises :class:`Unavailable` saying why (no py4j gateway: Spark Connect; a driver whose class loader cannot take a jar at run
time; a Spark without Janino or with other ORC internals); callers then read through
Spark's ORC reader or the Python data source instead.
"""

from __future__ import annotations

import atexit
import hashlib
import os
import shutil
import tempfile
import threading
import zipfile
from importlib import resources
from typing import Dict, Optional, Tuple

from pyspark.sql import SparkSession

SOURCE = "AcidOrcSource.java"
SINK_SOURCE = "AcidOrcSink.java"
_PACKAGE = "hmstxn.spark"

_mu = threading.Lock()
_built: Dict[Tuple[int, str], Tuple[str, str]] = {}  # (id(gateway), source) -> (class, jar)
_failed: Dict[Tuple[int, str], str] = {}             # (id(gateway), source) -> why not
_added: set = set()                     # (id(gateway), source, applicationId): addJar done
_workdir: Optional[str] = None


class Unavailable(Exception):
    """The JVM reader cannot run in this session; the message says why."""


def source_text(source: str = SOURCE) -> Tuple[str, str]:
    """(the Java source with its versioned package, the fully qualified class name)."""
    text = resources.files("spark").joinpath("jvm", source).read_text(encoding="utf-8")
    digest = hashlib.sha1(text.encode("utf-8")).hexdigest()[:12]
    package = f"{_PACKAGE}.h{digest}"
    marker = f"package {_PACKAGE};"
    if marker not in text:
        raise Unavailable(f"{source} does not declare {marker}")
    return (text.replace(marker, f"package {package};", 1),
            f"{package}.{source.rsplit('.', 1)[0]}")


def _jar_dir() -> str:
    global _workdir
    if _workdir is None:
        _workdir = tempfile.mkdtemp(prefix="hive-acid-jvm-")
        atexit.register(shutil.rmtree, _workdir, True)
    return _workdir


def _compile(sc, source: str) -> Tuple[str, str]:
    """Compile ``source`` in the driver's JVM -> (class name, jar path)."""
    from py4j.protocol import Py4JError
    text, name = source_text(source)
    jvm = sc._jvm
    loader = jvm.java.lang.Thread.currentThread().getContextClassLoader()
    try:
        compiler = jvm.org.codehaus.janino.SimpleCompiler()
        compiler.setParentClassLoader(loader)
        compiler.cook(text)
        codes = compiler.getBytecodes()
        classes = {str(k): bytes(codes.get(k)) for k in codes.keySet()}
    except Py4JError as e:
        raise Unavailable(f"compiling {source} with Spark's Janino failed: "
                          f"{str(e).splitlines()[0][:300]}") from None
    jar = os.path.join(_jar_dir(), f"{name}.jar")
    with zipfile.ZipFile(jar, "w") as z:
        z.writestr("META-INF/MANIFEST.MF", "Manifest-Version: 1.0\n")
        for cls, code in sorted(classes.items()):
            z.writestr(cls.replace(".", "/") + ".class", code)
    try:
        loader.addURL(jvm.java.io.File(jar).toURI().toURL())
        jvm.java.lang.Class.forName(name, True, loader)
    except Py4JError as e:
        raise Unavailable(f"the driver's class loader ({loader.getClass().getName()}) does "
                          f"not take the jar of {source} at run time: "
                          f"{str(e).splitlines()[0][:200]}") from None
    return name, jar


def jvm_class(jvm, name: str):
    """The JVM class ``name`` (a dotted name) in py4j's view (for its static methods)."""
    obj = jvm
    for part in name.split("."):
        obj = getattr(obj, part)
    return obj


def reader_class(session: SparkSession) -> str:
    """The JVM reader's class name, usable in ``session.read.format(...)``; raises
    :class:`Unavailable`."""
    return _class_of(session, SOURCE)


def sink_class(session: SparkSession) -> str:
    """The JVM insert writer's class name, usable in ``df.write.format(...)``; raises
    :class:`Unavailable`."""
    return _class_of(session, SINK_SOURCE)


def _class_of(session: SparkSession, source: str) -> str:
    sc = getattr(session, "sparkContext", None)
    gateway = getattr(sc, "_gateway", None) if sc is not None else None
    if gateway is None:
        raise Unavailable("no py4j gateway in this session (Spark Connect)")
    key = (id(gateway), source)
    with _mu:
        if key in _failed:
            raise Unavailable(_failed[key])
        if key not in _built:
            try:
                _built[key] = _compile(sc, source)
            except Unavailable as e:
                _failed[key] = str(e)
                raise
        name, jar = _built[key]
        app = key + (sc.applicationId,)
        if app not in _added:
            sc._jsc.sc().addJar(jar)
            _added.add(app)
    return name
