"""The project's one file-system layer: a table location -> (pyarrow file system, path).

A location is what the metastore stores (Hadoop's ``Path.toString``); its scheme picks the
file system with Hadoop's names:

==========================  ===========================================================
``s3a://b/k``, ``s3://b/k``   ``pyarrow.fs.S3FileSystem``, path ``b/k``
``abfs[s]://c@acct.dfs..``    ``pyarrow.fs.AzureFileSystem(account_name=acct)``, path ``c/k``
``wasb[s]://c@acct.blob..``   the same (Blob and ADLS Gen2 share the account)
``gs://b/k``                  ``pyarrow.fs.GcsFileSystem``, path ``b/k``
``hdfs://nn:port/p``          ``pyarrow.fs.HadoopFileSystem`` (needs libhdfs), path ``/p``
``file:/p``, ``/p``           the local disk, used through ``os`` (``fs`` is None)
==========================  ===========================================================

Options are a plain mapping of Hadoop's configuration keys (the metastore passes the
``fs.*`` keys of its hive-site.xml, Spark its ``spark.hadoop.fs.*`` conf): see
:func:`s3_options`, :func:`azure_options`, :func:`gcs_options`. Credentials that are not
in the options come from the environment exactly as the cloud SDKs inside pyarrow read them
(``AWS_ACCESS_KEY_ID``/``AWS_SECRET_ACCESS_KEY``/``AWS_SESSION_TOKEN``, ``~/.aws``, instance
metadata; ``AZURE_STORAGE_ACCOUNT_KEY`` and Azure's default credential chain;
``GOOGLE_APPLICATION_CREDENTIALS``).

Object-store semantics (what the writers of this package rely on, see their docstrings):
an object appears whole or not at all when its upload completes; there is no atomic rename,
no append, no fsync, and a listing is not a snapshot. So on an object store nothing is
published by renaming: a file is written under its final name, and what makes it visible to
readers is the metastore commit of its write id (or compaction transaction), as in Hive on
S3. ``can_rename`` tells the writers which model they are in.

No pyarrow import at module load (the metastore imports this module); pyarrow.fs is
imported when a non-local location is resolved.
"""

from __future__ import annotations

import os
import shutil
import threading
from typing import Dict, List, Mapping, Optional, Tuple
from urllib.parse import urlsplit

from .layout import location_path

__all__ = ["FileSystemError", "filesystem_for", "resolve", "scheme_of", "s3_options",
           "azure_options", "gcs_options", "can_rename", "join", "makedirs", "exists",
           "is_dir", "list_names", "walk_files", "read_bytes", "write_bytes", "delete_tree", "delete_file",
           "file_size", "uri_of", "SCHEMES", "hadoop_options", "write_new"]

S3_SCHEMES = ("s3a", "s3", "s3n")
AZURE_SCHEMES = ("abfs", "abfss", "wasb", "wasbs")
GCS_SCHEMES = ("gs",)
HDFS_SCHEMES = ("hdfs", "viewfs")
SCHEMES = ("file",) + S3_SCHEMES + AZURE_SCHEMES + GCS_SCHEMES + HDFS_SCHEMES


class FileSystemError(ValueError):
    """A location no file system of this layer can serve, or options it cannot use."""


def scheme_of(location: Optional[str]) -> str:
    """``s3a``, ``abfss``, ..., or ``file`` for a local path."""
    if not location or location_path(location) is not None:
        return "file"
    return urlsplit(location).scheme.lower()


def hadoop_options(conf: Mapping[str, str], prefix: str = "") -> Dict[str, str]:
    """The file-system keys (``fs.*``) of a configuration, ``prefix`` removed first (Spark:
    ``spark.hadoop.``)."""
    out = {}
    for k, v in conf.items():
        if prefix and k.startswith(prefix):
            k = k[len(prefix):]
        elif prefix:
            continue
        if k.startswith("fs.") and v is not None:
            out[k] = str(v)
    return out


def _flag(v: Optional[str]) -> Optional[bool]:
    return None if v is None else str(v).strip().lower() in ("true", "1", "yes")


def s3_options(options: Mapping[str, str], bucket: str) -> dict:
    """S3FileSystem arguments from S3A's keys; a per-bucket key ``fs.s3a.bucket.B.X`` wins
    over ``fs.s3a.X`` (S3A's per-bucket configuration).

    ``fs.s3a.endpoint`` (``host:port`` or a URL), ``fs.s3a.connection.ssl.enabled``
    (scheme when the endpoint has none), ``fs.s3a.path.style.access`` (default false, as in
    S3A: virtual-host addressing when an endpoint is given), ``fs.s3a.endpoint.region``
    (or ``fs.s3a.region``), ``fs.s3a.access.key``/``secret.key``/``session.token``,
    ``fs.s3a.assumed.role.arn``, ``fs.s3a.aws.credentials.provider`` naming
    ``AnonymousAWSCredentialsProvider`` -> anonymous."""
    def get(key: str) -> Optional[str]:
        v = options.get(f"fs.s3a.bucket.{bucket}.{key}")
        return v if v is not None else options.get(f"fs.s3a.{key}")

    kw: dict = {"allow_delayed_open": True}   # a small file is one PUT, not a multipart upload
    endpoint = get("endpoint")
    if endpoint:
        ssl = _flag(get("connection.ssl.enabled"))
        scheme = "http" if ssl is False else "https"
        if "://" in endpoint:
            scheme, endpoint = endpoint.split("://", 1)
        kw["endpoint_override"] = endpoint.rstrip("/")
        kw["scheme"] = scheme
        kw["force_virtual_addressing"] = not _flag(get("path.style.access"))
    region = get("endpoint.region") or get("region")
    if region:
        kw["region"] = region
    for key, arg in (("access.key", "access_key"), ("secret.key", "secret_key"),
                     ("session.token", "session_token"), ("assumed.role.arn", "role_arn")):
        v = get(key)
        if v:
            kw[arg] = v
    if "AnonymousAWSCredentialsProvider" in (get("aws.credentials.provider") or ""):
        kw["anonymous"] = True
    return kw


def azure_options(options: Mapping[str, str], account: str, host: str) -> dict:
    """AzureFileSystem arguments: ``fs.azure.account.key.<host>`` (ABFS/WASB's shared key,
    ``<host>`` = ``acct.dfs.core.windows.net`` or ``acct.blob.core.windows.net``; either
    form is accepted for both); ``fs.azure.sas.fixed.token.<host>`` (SAS). For an emulator
    or another endpoint (Azurite): ``fs.azure.storage.blob.endpoint`` and
    ``fs.azure.storage.dfs.endpoint`` (``http://127.0.0.1:10000``; hms-txn's keys, Hadoop
    has none)."""
    kw: dict = {"account_name": account}
    hosts = [host, f"{account}.dfs.core.windows.net", f"{account}.blob.core.windows.net"]
    for h in hosts:
        key = options.get(f"fs.azure.account.key.{h}")
        if key:
            kw["account_key"] = key
            break
    else:
        for h in hosts:
            sas = options.get(f"fs.azure.sas.fixed.token.{h}")
            if sas:
                kw["sas_token"] = sas
                break
    for kind in ("blob", "dfs"):
        ep = options.get(f"fs.azure.storage.{kind}.endpoint")
        if ep:
            scheme, _, authority = ep.rpartition("://")
            kw[f"{kind}_storage_authority"] = authority.rstrip("/")
            kw[f"{kind}_storage_scheme"] = scheme or "https"
    return kw


def gcs_options(options: Mapping[str, str]) -> dict:
    """GcsFileSystem arguments: ``fs.gs.project.id``, ``fs.gs.storage.root.url`` (an
    endpoint such as an emulator's); credentials from ``GOOGLE_APPLICATION_CREDENTIALS``."""
    kw: dict = {}
    if options.get("fs.gs.project.id"):
        kw["project_id"] = options["fs.gs.project.id"]
    root = options.get("fs.gs.storage.root.url")
    if root:
        scheme, _, authority = root.rpartition("://")
        kw["endpoint_override"] = authority.rstrip("/")
        kw["scheme"] = scheme or "https"
    return kw


_CACHE: Dict[tuple, object] = {}
_LOCK = threading.Lock()


def _cached(key: tuple, make):
    with _LOCK:
        fs = _CACHE.get(key)
        if fs is None:
            fs = _CACHE[key] = make()
        return fs


def _split(location: str) -> Tuple[str, str, str]:
    parts = urlsplit(location)
    return parts.scheme.lower(), parts.netloc, parts.path


def filesystem_for(location: str, options: Optional[Mapping[str, str]] = None):
    """-> (pyarrow FileSystem, path in it), or (None, local path) for the local disk.

    File systems are cached per (scheme, account/bucket/namenode, options)."""
    local = location_path(location)
    if local is not None:
        return None, local
    options = dict(options or {})
    scheme, netloc, path = _split(location)
    key_opts = tuple(sorted(options.items()))
    import pyarrow.fs as pafs
    if scheme in S3_SCHEMES:
        if not netloc:
            raise FileSystemError(f"{location!r}: an S3 location names its bucket "
                                  f"(s3a://bucket/path)")
        kw = s3_options(options, netloc)
        fs = _cached(("s3", netloc, key_opts), lambda: pafs.S3FileSystem(**kw))
        return fs, f"{netloc}{path}".rstrip("/")
    if scheme in AZURE_SCHEMES:
        container, at, host = netloc.partition("@")
        if not at or not host:
            raise FileSystemError(f"{location!r}: an Azure location is "
                                  f"{scheme}://container@account.dfs.core.windows.net/path")
        account = host.split(".", 1)[0]
        kw = azure_options(options, account, host)
        fs = _cached(("azure", account, key_opts), lambda: pafs.AzureFileSystem(**kw))
        return fs, f"{container}{path}".rstrip("/")
    if scheme in GCS_SCHEMES:
        kw = gcs_options(options)
        fs = _cached(("gcs", key_opts), lambda: pafs.GcsFileSystem(**kw))
        return fs, f"{netloc}{path}".rstrip("/")
    if scheme in HDFS_SCHEMES:
        host, _, port = netloc.partition(":")
        try:
            fs = _cached(("hdfs", netloc, key_opts), lambda: pafs.HadoopFileSystem(
                host or "default", int(port or 0)))
        except OSError as e:
            raise FileSystemError(f"{location!r}: HDFS needs libhdfs (set ARROW_LIBHDFS_DIR, "
                                  f"HADOOP_HOME, JAVA_HOME and CLASSPATH): {e}") from e
        return fs, path.rstrip("/") or "/"
    raise FileSystemError(f"{location!r}: no file system for scheme {scheme!r} (supported: "
                          f"file, s3a/s3, abfs(s)/wasb(s), gs, hdfs)")


def resolve(location: str, filesystem=None, options: Optional[Mapping[str, str]] = None):
    """(file system, path) for a location, given an optional explicit file system: then a
    location with a scheme is turned into the path that file system uses for it (a plain
    path is taken as it is)."""
    if filesystem is None:
        return filesystem_for(location, options)
    if location_path(location) is not None and "://" not in location:
        return filesystem, location_path(location)
    scheme, netloc, path = _split(location)
    if scheme in AZURE_SCHEMES:
        return filesystem, f"{netloc.partition('@')[0]}{path}".rstrip("/")
    if scheme in HDFS_SCHEMES or scheme == "file":
        return filesystem, path.rstrip("/") or "/"
    return filesystem, f"{netloc}{path}".rstrip("/")


def uri_of(reference: str, path: str) -> str:
    """The location URI of ``path`` (a path of the file system ``reference``, a location
    URI, resolves to): ``bucket/k`` -> ``s3a://bucket/k``, ``container/k`` ->
    ``abfs://container@host/k``, ``/p`` -> ``hdfs://nn/p``."""
    scheme, netloc, _ = _split(reference)
    if scheme in AZURE_SCHEMES:
        container, _, rest = path.partition("/")
        return f"{scheme}://{container}@{netloc.partition('@')[2]}/{rest}"
    if scheme in HDFS_SCHEMES:
        return f"{scheme}://{netloc}{path}"
    return f"{scheme}://{path}"


def can_rename(fs) -> bool:
    """Whether directories can be renamed atomically: the local disk and HDFS yes, object
    stores no (S3 copies and deletes, key by key)."""
    if fs is None:
        return True
    import pyarrow.fs as pafs
    inner = fs
    if isinstance(fs, pafs.PyFileSystem):
        inner = getattr(fs.handler, "fs", None)
        if inner is None:
            return False
        return can_rename(inner)
    return isinstance(inner, (pafs.LocalFileSystem, pafs.HadoopFileSystem))


# -- small operations over both the local disk (fs None) and pyarrow file systems ----------

def join(path: str, *names: str) -> str:
    out = path.rstrip("/") if path != "/" else ""
    for n in names:
        out += "/" + n
    return out


def makedirs(fs, path: str) -> None:
    """Create a directory (and parents). On object stores directories are implied by the
    objects under them, so nothing is written there."""
    if fs is None:
        os.makedirs(path, exist_ok=True)
    elif can_rename(fs):
        fs.create_dir(path, recursive=True)


def exists(fs, path: str) -> bool:
    if fs is None:
        return os.path.exists(path)
    import pyarrow.fs as pafs
    return fs.get_file_info(path).type != pafs.FileType.NotFound


def is_dir(fs, path: str) -> bool:
    if fs is None:
        return os.path.isdir(path)
    import pyarrow.fs as pafs
    return fs.get_file_info(path).type == pafs.FileType.Directory


def list_names(fs, path: str) -> List[Tuple[str, bool, int]]:
    """(name, is_dir, size) of the entries directly in ``path``; [] when it is missing."""
    if fs is None:
        try:
            with os.scandir(path) as it:
                return [(e.name, e.is_dir(follow_symlinks=False),
                         0 if e.is_dir(follow_symlinks=False) else e.stat().st_size)
                        for e in it]
        except (FileNotFoundError, NotADirectoryError):
            return []
    import pyarrow.fs as pafs
    infos = fs.get_file_info(pafs.FileSelector(path, allow_not_found=True))
    return [(i.base_name, i.type == pafs.FileType.Directory, i.size or 0) for i in infos]


def walk_files(fs, path: str) -> List[Tuple[str, int]]:
    """(relative path, size) of every file under ``path``, recursively (one listing on an
    object store; paginated by the store); [] when it is missing."""
    if fs is None:
        out = []
        for root, _, files in os.walk(path):
            rel_dir = os.path.relpath(root, path)
            for name in files:
                full = os.path.join(root, name)
                try:
                    size = os.path.getsize(full)
                except OSError:
                    continue
                out.append((name if rel_dir == "." else f"{rel_dir}/{name}", size))
        return out
    import pyarrow.fs as pafs
    root = path.rstrip("/") + "/"
    infos = fs.get_file_info(pafs.FileSelector(path, recursive=True, allow_not_found=True))
    return [(i.path[len(root):], i.size or 0) for i in infos if i.type == pafs.FileType.File]


def file_size(fs, path: str) -> int:
    if fs is None:
        return os.path.getsize(path)
    return fs.get_file_info(path).size


def read_bytes(fs, path: str) -> bytes:
    if fs is None:
        with open(path, "rb") as fh:
            return fh.read()
    with fs.open_input_stream(path) as fh:
        return fh.read()


def write_bytes(fs, path: str, data) -> None:
    """Write a whole object (one upload on object stores: it appears complete or not at
    all) from ``data``: bytes, or a list of buffers written one after the other (a file
    assembled from pieces is not copied into one). Local files are written in place;
    callers wanting atomic local publication use a temporary name."""
    parts = data if isinstance(data, list) else [data]
    if fs is None:
        with open(path, "wb") as fh:
            for part in parts:
                fh.write(part)
        return
    with fs.open_output_stream(path) as out:
        for part in parts:
            out.write(part)


def delete_tree(fs, path: str) -> bool:
    """Delete a directory with everything under it; False when there was none."""
    if fs is None:
        if not os.path.lexists(path):
            return False
        if os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path)
        else:
            os.unlink(path)
        return True
    import pyarrow.fs as pafs
    info = fs.get_file_info(path)
    if info.type == pafs.FileType.NotFound:
        return False
    if info.type == pafs.FileType.File:
        fs.delete_file(path)
    else:
        fs.delete_dir(path)
    return True


def delete_file(fs, path: str) -> None:
    if fs is None:
        os.unlink(path)
    else:
        fs.delete_file(path)


def write_new(fs, path: str, data: bytes) -> None:
    """Write a file that must not exist yet, durably: FileExistsError if it does. On the
    local disk the bytes go to a temporary name, are fsynced, linked to ``path`` (a link
    never replaces a file) and the directory is fsynced, so a file that exists is whole
    and survives a power cut once this returns. On an object store one upload (complete or
    absent); there is no create-if-absent there, callers use names nobody else can choose
    (a random UUID in them)."""
    if fs is not None:
        if exists(fs, path):
            raise FileExistsError(path)
        write_bytes(fs, path, data)
        return
    directory = os.path.dirname(path) or "."
    os.makedirs(directory, exist_ok=True)
    tmp = f"{path}.{os.getpid()}.{threading.get_ident()}.tmp"
    with open(tmp, "wb") as fh:
        fh.write(data)
        fh.flush()
        os.fsync(fh.fileno())
    try:
        os.link(tmp, path)
    finally:
        os.unlink(tmp)
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
