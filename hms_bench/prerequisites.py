"""What ``hms-txn bench`` needs from the machine, checked before anything starts: each
missing piece named with the Debian package that provides it (the Java metastore otherwise
just exits, and PostgreSQL fails deep inside a run)."""

from __future__ import annotations

import os
import shutil

from hms_bench import javahms


def missing_packages(*, java: bool, java_on_postgres: bool, postgres: bool) -> list[str]:
    """One line for each thing the run needs that this machine lacks."""
    problems = []
    if java and not shutil.which("java"):
        problems.append("the Java metastore needs java on PATH, Java 17 or newer (Debian: "
                        "openjdk-17-jre-headless; or --no-java)")
    if java and java_on_postgres and not os.path.isfile(javahms.POSTGRES_JDBC_JAR):
        problems.append(f"--java-db postgres needs the PostgreSQL JDBC driver "
                        f"{javahms.POSTGRES_JDBC_JAR}: install Debian's libpostgresql-jdbc-java "
                        f"(or use --java-db derby)")
    if postgres:
        from hms_bench.servers import pg_bindir
        try:
            pg_bindir()
        except RuntimeError:
            problems.append("the PostgreSQL backend needs the PostgreSQL server binaries: "
                            "install Debian's postgresql (or --backends sqlite)")
    return problems

