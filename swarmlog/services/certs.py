"""Certificates for local TLS services and their tests, made with the `openssl` command: authorities, servers, clients.

Keys are P-256 (fast to make, read by Python's ssl, Java's PEM keystores and Redis alike) in PKCS#8 PEM files without
a passphrase; every certificate is signed by `openssl ca`, which alone can back-date one (an expired client).
"""

from __future__ import annotations

import dataclasses
import ipaddress
from collections.abc import Sequence
from pathlib import Path

from swarmlog.services import process

DAYS = 30
EXPIRED = ("20200101000000Z", "20200102000000Z")
"""The validity of an expired certificate: one day, years ago."""
CA_CONFIG = """\
[ca]
default_ca = local
[local]
database = {directory}/index.txt
new_certs_dir = {directory}/issued
serial = {directory}/serial
default_md = sha256
policy = any
unique_subject = no
[any]
commonName = supplied
"""


@dataclasses.dataclass(frozen=True)
class Issued:
    """A certificate and its private key as PEM files; `bundle` holds the key, the certificate and its issuer's (the
    one-file keystore Kafka's `ssl.keystore.type=PEM` reads)."""

    cert: Path
    key: Path
    bundle: Path


@dataclasses.dataclass(frozen=True)
class Authority:
    """A certificate authority kept in `directory`: `cert` is what peers trust, `issue` signs with its key."""

    directory: Path
    name: str

    @property
    def cert(self) -> Path:
        """The authority's certificate (the CA file its peers are given)."""
        return self.directory / "ca.pem"

    @property
    def key(self) -> Path:
        """The authority's private key."""
        return self.directory / "ca.key"

    @classmethod
    def create(cls, directory: Path, name: str, days: int = DAYS) -> Authority:
        """A new self-signed authority named `name` (its certificate's CN) in `directory`."""
        authority = cls(directory, name)
        (directory / "issued").mkdir(parents=True, exist_ok=True)
        (directory / "index.txt").touch()
        (directory / "ca.cnf").write_text(CA_CONFIG.format(directory=directory))
        authority._openssl(
            "req", "-x509", *_new_key(authority.key), "-days", str(days), "-subj", f"/CN={name}",
            "-out", authority.cert, "-addext", "basicConstraints=critical,CA:TRUE",
            "-addext", "keyUsage=critical,keyCertSign,cRLSign",
        )  # fmt: skip
        return authority

    def server(self, name: str, hosts: Sequence[str] = ("127.0.0.1", "localhost")) -> Issued:
        """A certificate for a server at `hosts` (IP addresses and DNS names), usable as a client too (a broker
        talking to its controllers), its CN `name`."""
        return self.issue(name, name, hosts=hosts)

    def client(self, common_name: str, *, expired: bool = False) -> Issued:
        """A client certificate whose CN is `common_name` (the principal a server maps it to)."""
        return self.issue(common_name, common_name, expired=expired)

    def issue(
        self, name: str, common_name: str, *, hosts: Sequence[str] = (), expired: bool = False, days: int = DAYS
    ) -> Issued:
        """A new key and a certificate for it signed by this authority, saved as `<name>.pem`/`.key`/`-bundle.pem`;
        with `hosts` it serves those names, and an `expired` one was valid for a day in 2020."""
        issued = Issued(*(self.directory / f"{name}{suffix}" for suffix in (".pem", ".key", "-bundle.pem")))
        request = self.directory / f"{name}.csr"
        extensions = self.directory / f"{name}.ext"
        usage = "serverAuth,clientAuth" if hosts else "clientAuth"
        names = ",".join(f"IP:{host}" if _is_address(host) else f"DNS:{host}" for host in hosts)
        extensions.write_text(
            f"basicConstraints=CA:FALSE\nkeyUsage=digitalSignature,keyEncipherment\nextendedKeyUsage={usage}\n"
            + (f"subjectAltName={names}\n" if names else "")
        )
        self._openssl("req", "-new", *_new_key(issued.key), "-subj", f"/CN={common_name}", "-out", request)
        validity = ["-startdate", EXPIRED[0], "-enddate", EXPIRED[1]] if expired else ["-days", str(days)]
        self._openssl(
            "ca", "-batch", "-notext", "-rand_serial", "-config", self.directory / "ca.cnf", "-cert", self.cert,
            "-keyfile", self.key, "-in", request, "-out", issued.cert, "-extfile", extensions, *validity,
        )  # fmt: skip
        issued.bundle.write_text(issued.key.read_text() + issued.cert.read_text() + self.cert.read_text())
        return issued

    def _openssl(self, *argv: str | Path) -> None:
        """Run one openssl command, its output in the authority's log; ServiceError with the log's tail if it fails."""
        openssl = process.require_binary("openssl", apt_package="openssl", needed_by="Making TLS certificates")
        process.run_once(
            [openssl, *map(str, argv)], what=f"openssl {argv[0]} for {self.name}", log=self.directory / "openssl.log"
        )


def _new_key(path: Path) -> list[str | Path]:
    """openssl req's arguments for a new unencrypted P-256 key written to `path`."""
    return ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout", path]


def _is_address(host: str) -> bool:
    """Whether `host` is an IP address (v4 or v6) rather than a DNS name."""
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True
