"""The schema evolution gate CI runs: compatible versions, explicit full names, published versions never edited."""

from __future__ import annotations

import argparse
import itertools
import json
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path

import avro.schema
from avro.compatibility import ReaderWriterCompatibilityChecker, SchemaCompatibilityType

from swarmlog.errors import SchemaCompatibilityError
from swarmlog.schemas.catalog import PACKAGE_DIR, SchemaCatalog, SchemaVersion
from swarmlog.schemas.events import NAMESPACE

LOCK_NAME = "fingerprints.lock"
LOCK_HEADER = (
    "# Published schema versions, append-only: `Name vN <fingerprint>`, the fingerprint being the CRC-64-AVRO of the\n"
    "# Parsing Canonical Form as its 8 little-endian wire bytes in hex. "
    "Written by `python -m swarmlog.schemas.compat --update-lock`.\n"
)
LockKey = tuple[str, int]


def incompatibility(reader: SchemaVersion, writer: SchemaVersion) -> str | None:
    """Why data written with `writer` cannot be read with `reader` (Apache Avro's resolution rules), or None."""
    checker = ReaderWriterCompatibilityChecker()  # type: ignore[no-untyped-call]  # avro leaves __init__ unannotated
    result = checker.get_compatibility(_apache(reader), _apache(writer))
    if result.compatibility is SchemaCompatibilityType.compatible:
        return None
    kinds = ", ".join(sorted({kind.value.replace("_", " ") for kind in result.incompatibilities}))
    where = ", ".join(sorted(result.locations - {"/"}) or ["/"])
    return f"{kinds}: {'; '.join(sorted(result.messages))} (at {where})"


def _apache(version: SchemaVersion) -> avro.schema.Schema:
    return avro.schema.parse(json.dumps(version.schema))


def _evolution_problems(catalog: SchemaCatalog) -> Iterable[str]:
    """Full names, contiguous versions, and backward + forward compatibility between every two versions.

    Transitive, not just with the version before: decoders read events of any kept version into the latest.
    """
    for name in catalog.names():
        versions = catalog.versions(name)
        for version in versions:
            if version.full_name != f"{NAMESPACE}.{name}":
                yield f"{version.label}: full name is {version.full_name}, must be {NAMESPACE}.{name}"
        numbers = [version.version for version in versions]
        if numbers != list(range(1, len(numbers) + 1)):
            yield f"{name}: versions {numbers} must be v1, v2, ... without gaps"
        for older, newer in itertools.combinations(versions, 2):
            if backward := incompatibility(newer, older):
                yield f"{newer.label} cannot read {older.label} (not backward compatible): {backward}"
            if forward := incompatibility(older, newer):
                yield f"{older.label} cannot read {newer.label} (not forward compatible): {forward}"


def read_lock(path: Path) -> dict[LockKey, str]:
    """The published fingerprints: `Name vN <hex>` per line."""
    published: dict[LockKey, str] = {}
    if not path.exists():
        return published
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        parts = line.split()
        if not parts or line.startswith("#"):
            continue
        if len(parts) != 3 or parts[1][:1] != "v" or not parts[1][1:].isdigit():
            raise SchemaCompatibilityError(f"{path}:{number}: expected `Name vN <hex fingerprint>`, got {line!r}")
        published[(parts[0], int(parts[1][1:]))] = parts[2]
    return published


def _lock_problems(catalog: SchemaCatalog, published: dict[LockKey, str]) -> Iterable[str]:
    """Published versions that were edited or deleted, and versions not published yet."""
    present = {(version.name, version.version): version for version in catalog}
    for (name, number), locked in sorted(published.items()):
        version = present.get((name, number))
        if version is None:
            yield f"{name} v{number} is published but its file is gone; every version is kept forever, restore it"
        elif version.fingerprint.hex() != locked:
            yield (
                f"{version.label} was edited after it was published (fingerprint {version.fingerprint.hex()}, "
                f"published {locked}): revert it and add v{len(catalog.versions(name)) + 1} instead"
            )


def _unpublished(catalog: SchemaCatalog, published: dict[LockKey, str]) -> list[SchemaVersion]:
    return sorted(
        (version for version in catalog if (version.name, version.version) not in published),
        key=lambda version: (version.name, version.version),
    )


def check_schemas(root: Path = PACKAGE_DIR, *, update_lock: bool = False) -> list[str]:
    """Problems with the catalog under `root` (avro/ and fingerprints.lock); with update_lock, publish new versions."""
    lock_path = root / LOCK_NAME
    try:
        catalog = SchemaCatalog.from_directory(root / "avro")
        published = read_lock(lock_path)
    except SchemaCompatibilityError as exc:
        return [str(exc)]
    problems = [*_evolution_problems(catalog), *_lock_problems(catalog, published)]
    new = _unpublished(catalog, published)
    if update_lock and not problems:
        if not lock_path.exists():
            lock_path.write_text(LOCK_HEADER, encoding="utf-8")
        with lock_path.open("a", encoding="utf-8") as lock:
            lock.writelines(f"{version.label} {version.fingerprint.hex()}\n" for version in new)
    elif new:
        problems += [
            f"{version.label} is not in {LOCK_NAME}; publish it with `python -m swarmlog.schemas.compat --update-lock`"
            for version in new
        ]
    return problems


def main(argv: Sequence[str] | None = None) -> int:
    """Print the catalog's problems; exit status 1 when there are any."""
    parser = argparse.ArgumentParser(prog="python -m swarmlog.schemas.compat", description=check_schemas.__doc__)
    parser.add_argument("--root", type=Path, default=PACKAGE_DIR, help="folder holding avro/ and fingerprints.lock")
    parser.add_argument("--update-lock", action="store_true", help="append new versions to fingerprints.lock")
    args = parser.parse_args(argv)
    problems = check_schemas(args.root, update_lock=args.update_lock)
    for problem in problems:
        print(problem, file=sys.stderr)
    if not problems:
        print(f"schemas OK ({args.root / LOCK_NAME})")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
