"""Iceberg metadata files: read, parsed with pyiceberg, written, and purged.

A metadata file never changes once written (each commit writes a new one under a new name,
``NNNNN-<uuid>.metadata.json``), so what is read of one is kept by its location (bounded,
least recently used first): a table load reads the file once, not once per call. Every file
access goes through ``orc_acid.fs`` (local disk or an object store, with the metastore's
``fs.*`` keys).

pyiceberg applies commits (``update_table_metadata``), and it keeps only the fields it
knows: a file written by a newer Iceberg (another format version, keys pyiceberg 0.12 does
not model) would lose what pyiceberg drops if it were rewritten. ``require_round_trip``
refuses to build on such a file instead (a 400 at the REST edge); reads of it are served
as written.
"""

from __future__ import annotations

import gzip
import io
import json
import re
import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError
from pyiceberg.io import FileIO, InputFile, InputStream, OutputFile
from pyiceberg.table.metadata import TableMetadata, TableMetadataUtil
from pyiceberg.typedef import Properties

from orc_acid import fs as afs
from hms_txn.common.errors import InvalidInput

# The newest table format version pyiceberg (the pinned range) round-trips.
MAX_FORMAT_VERSION = 2
_METADATA_NAME = re.compile(r"^(\d+)-[0-9a-fA-F-]{36}(\.gz)?\.metadata\.json$")


@dataclass
class MetadataFile:
    """One metadata file as read: its bytes (decompressed) and its JSON document; the
    pyiceberg model once something asked for it."""
    location: str
    raw: bytes
    doc: dict
    model: TableMetadata | None = None
    round_trip_error: str | None = field(default=None)
    checked: bool = False


def metadata_version(location: str | None) -> int:
    """The version number in a metadata file's name (-1 when it has none)."""
    match = _METADATA_NAME.match((location or "").rsplit("/", 1)[-1])
    return int(match.group(1)) if match else -1


def format_error(err: ValidationError) -> str:
    """pydantic's errors in one line: where and what."""
    parts = []
    for item in err.errors()[:5]:
        where = ".".join(str(p) for p in item.get("loc", ()))
        parts.append(f"{where}: {item.get('msg')}" if where else str(item.get("msg")))
    return "; ".join(parts)


def parse_metadata(doc: dict) -> TableMetadata:
    """A metadata document as pyiceberg's model (InvalidInput when it is not one)."""
    try:
        return TableMetadataUtil.parse_obj(doc)
    except ValidationError as err:
        raise InvalidInput(f"not valid Iceberg table metadata: {format_error(err)}") from None
    except Exception as err:   # pyiceberg's own ValidationError and value checks
        raise InvalidInput(f"not valid Iceberg table metadata: {err}") from None


def dump_metadata(metadata: TableMetadata) -> bytes:
    """A metadata file's bytes, as pyiceberg writes them (``ToOutputFile``)."""
    return metadata.model_dump_json(exclude_none=True).encode()


def lost_keys(raw: Any, dumped: Any, path: str = "") -> list[str]:
    """Keys of ``raw`` (a JSON document) that ``dumped`` (the same document after a round
    trip through pyiceberg's model) no longer has."""
    if isinstance(raw, dict) and isinstance(dumped, dict):
        out = []
        for key, value in raw.items():
            where = f"{path}.{key}" if path else key
            if key not in dumped:
                if value is not None:
                    out.append(where)
            else:
                out.extend(lost_keys(value, dumped[key], where))
        return out
    if isinstance(raw, list) and isinstance(dumped, list) and len(raw) == len(dumped):
        out = []
        for i, (a, b) in enumerate(zip(raw, dumped)):
            out.extend(lost_keys(a, b, f"{path}[{i}]"))
        return out
    return []


class MetadataFiles:
    """Reads, caches and writes metadata files (``fs_options``: the ``fs.*`` keys)."""

    def __init__(self, fs_options: dict[str, str] | None = None, *,
                 max_entries: int = 2000, max_bytes: int = 64 * 1024 * 1024):
        self.fs_options = dict(fs_options or {})
        self.max_entries = max_entries
        self.max_bytes = max_bytes
        self._files: OrderedDict[str, MetadataFile] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()

    # -- reading ------------------------------------------------------------------------

    def read(self, location: str) -> MetadataFile:
        """The metadata file at ``location`` (InvalidInput when it cannot be read or is not
        JSON)."""
        with self._lock:
            found = self._files.get(location)
            if found is not None:
                self._files.move_to_end(location)
                return found
        raw = self.read_bytes(location)
        if location.endswith(".gz.metadata.json") or raw[:2] == b"\x1f\x8b":
            raw = gzip.decompress(raw)
        try:
            doc = json.loads(raw)
        except ValueError as err:
            raise InvalidInput(f"metadata file {location} is not JSON: {err}") from None
        if not isinstance(doc, dict):
            raise InvalidInput(f"metadata file {location} is not a JSON object")
        entry = MetadataFile(location, raw, doc)
        self._keep(entry)
        return entry

    def read_bytes(self, location: str) -> bytes:
        try:
            return afs.read_bytes(*afs.filesystem_for(location, self.fs_options))
        except (OSError, afs.FileSystemError) as err:
            raise InvalidInput(f"cannot read metadata file {location}: {err}") from None

    def model(self, entry: MetadataFile) -> TableMetadata:
        if entry.model is None:
            entry.model = parse_metadata(entry.doc)
        return entry.model

    def require_round_trip(self, entry: MetadataFile) -> TableMetadata:
        """The file's model, when building a new version on it loses nothing; InvalidInput
        naming what would be lost otherwise."""
        model = self.model(entry)
        if not entry.checked:
            version = entry.doc.get("format-version")
            if isinstance(version, int) and version > MAX_FORMAT_VERSION:
                entry.round_trip_error = (
                    f"format-version {version}: hms-txn's Iceberg REST catalog commits format "
                    f"versions 1 and 2 only (pyiceberg cannot rewrite newer metadata without "
                    f"loss); commit to this table with a client that writes its metadata itself")
            else:
                lost = lost_keys(entry.doc, json.loads(dump_metadata_all(model)))
                if lost:
                    entry.round_trip_error = (
                        f"metadata file {entry.location} has fields pyiceberg cannot keep "
                        f"({', '.join(lost[:10])}): a commit here would drop them; commit to "
                        f"this table with a client that writes its metadata itself")
            entry.checked = True
        if entry.round_trip_error:
            raise InvalidInput(entry.round_trip_error)
        return model

    def _keep(self, entry: MetadataFile) -> None:
        size = len(entry.raw) * 3      # the bytes, the document, the model: roughly
        if size > self.max_bytes:
            return
        with self._lock:
            if entry.location in self._files:
                return
            self._files[entry.location] = entry
            self._bytes += size
            while len(self._files) > self.max_entries or self._bytes > self.max_bytes:
                _, old = self._files.popitem(last=False)
                self._bytes -= len(old.raw) * 3

    # -- writing ------------------------------------------------------------------------

    def write(self, metadata: TableMetadata, location: str) -> MetadataFile:
        """Write a new metadata file (it must not exist), durably; kept as read."""
        if metadata.format_version > MAX_FORMAT_VERSION:
            raise InvalidInput(
                f"format-version {metadata.format_version}: hms-txn's Iceberg REST catalog "
                f"writes format versions 1 and 2 only (pyiceberg {_pyiceberg_version()} "
                f"cannot round-trip newer metadata)")
        raw = dump_metadata(metadata)
        data = gzip.compress(raw) if location.endswith(".gz.metadata.json") else raw
        found = afs.filesystem_for(location, self.fs_options)
        afs.makedirs(found[0], found[1].rsplit("/", 1)[0])
        afs.write_new(*found, data)
        entry = MetadataFile(location, raw, json.loads(raw), metadata, checked=True)
        self._keep(entry)
        return entry

    def delete(self, location: str) -> None:
        """Delete a metadata file nothing refers to (a failed commit's); best effort."""
        try:
            afs.delete_file(*afs.filesystem_for(location, self.fs_options))
        except (OSError, afs.FileSystemError):
            pass
        with self._lock:
            old = self._files.pop(location, None)
            if old is not None:
                self._bytes -= len(old.raw) * 3

    def file_io(self) -> "FsFileIO":
        return FsFileIO(self.fs_options)


def dump_metadata_all(metadata: TableMetadata) -> str:
    """Every field of the model, nulls included (what the round-trip check compares)."""
    return metadata.model_dump_json(exclude_none=False)


def _pyiceberg_version() -> str:
    import pyiceberg
    return pyiceberg.__version__


# ------------------------------------------------------------------ pyiceberg's FileIO

class _InputFile(InputFile):
    def __init__(self, location: str, options: dict[str, str]):
        super().__init__(location)
        self._found = afs.filesystem_for(location, options)

    def __len__(self) -> int:
        return afs.file_size(*self._found)

    def exists(self) -> bool:
        return afs.exists(*self._found)

    def open(self, seekable: bool = True) -> InputStream:
        return io.BytesIO(afs.read_bytes(*self._found))   # manifests: small files


class FsFileIO(FileIO):
    """pyiceberg's FileIO over ``orc_acid.fs``, for what the catalog reads itself
    (manifest lists and manifests, when a purge lists a table's files) and deletes."""

    def __init__(self, fs_options: dict[str, str], properties: Properties | None = None):
        super().__init__(properties or {})
        self.fs_options = fs_options

    def new_input(self, location: str) -> InputFile:
        return _InputFile(location, self.fs_options)

    def new_output(self, location: str) -> OutputFile:
        raise NotImplementedError("the catalog writes metadata files through MetadataFiles")

    def delete(self, location: str | InputFile | OutputFile) -> None:
        path = location if isinstance(location, str) else location.location
        afs.delete_file(*afs.filesystem_for(path, self.fs_options))
