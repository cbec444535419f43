"""Fingerprints of preparation inputs, so that re-running with the same inputs is a no-op.

A fingerprint is the SHA-256 of a canonical JSON rendering of everything the outputs
depend on (options, input file hashes, format and library versions). It is written last,
after every output, so an interrupted run never looks complete; the data directory's
own copy also names the version folder it describes (`publication.VERSION_KEY`).
"""

import hashlib
import json
import os
from typing import Any


def compute_fingerprint(identity: dict[str, Any]) -> str:
    """Returns the SHA-256 hex digest of `identity` rendered as canonical JSON."""
    canonical = json.dumps(identity, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return hashlib.sha256(canonical.encode("ascii")).hexdigest()


def read_fingerprint_fields(path: str) -> dict[str, Any] | None:
    """Returns the fields of the fingerprint file at `path`, or None if absent or
    unreadable."""
    try:
        with open(path, encoding="utf-8") as file:
            fields = json.load(file)
    except (OSError, ValueError):
        return None
    return fields if isinstance(fields, dict) else None


def read_fingerprint(path: str) -> str | None:
    """Returns the fingerprint stored at `path`, or None if absent or unreadable."""
    fingerprint = (read_fingerprint_fields(path) or {}).get("fingerprint")
    return fingerprint if isinstance(fingerprint, str) else None


def write_fingerprint(path: str, fingerprint: str, identity: dict[str, Any], **fields: Any) -> None:
    """Writes `fingerprint` with the `identity` it was computed from (for humans) and
    any other `fields`, atomically."""
    temporary_path = path + ".tmp"
    with open(temporary_path, "w", encoding="utf-8") as file:
        json.dump(
            {"fingerprint": fingerprint, "identity": identity, **fields},
            file,
            indent=2,
            sort_keys=True,
        )
        file.write("\n")
    os.replace(temporary_path, path)


def read_identity(path: str) -> dict[str, Any] | None:
    """Returns the identity stored with the fingerprint at `path`, or None."""
    identity = (read_fingerprint_fields(path) or {}).get("identity")
    return identity if isinstance(identity, dict) else None
