"""The local stack's certificate authority: its API servers speak HTTPS, as a cluster's do.

A Kubernetes API server is always reached over TLS, with the cluster's CA in the kubeconfig
(or the service account's ``ca.crt``), and registries are HTTPS; a service tested only over
plain HTTP never walks the path that breaks first in a cluster (a network library that took
``ssl`` before gevent patched it, a CA that is not passed on). So the stack makes a CA of its
own and a certificate for ``127.0.0.1`` and ``localhost`` signed by it, and serves the
Kubernetes API emulator and the registry with that certificate; the service trusts the CA as
it trusts a cluster's: through the kubeconfig the stack writes, and for registries through
``REQUESTS_CA_BUNDLE``, as a container with a private CA in its trust store would.

The files live in one directory: ``ca.crt`` (what clients trust), ``ca.key``, ``server.crt``
and ``server.key``. They are made once and reused while valid, so a CA a developer gave
``curl --cacert`` keeps working across ``make run``. ``DEVSTACK_TLS_DIR`` names the directory
every stack and emulator of a process uses (the test suite sets it, so that its one trust
bundle covers every stack it starts); otherwise a stack uses ``<state dir>/tls`` and a lone
emulator a directory of its process.
"""

from __future__ import annotations

import atexit
import datetime as dt
import fcntl
import ipaddress
import os
import shutil
import ssl
import tempfile
import threading
from pathlib import Path

import certifi
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

TLS_DIR_ENV = "DEVSTACK_TLS_DIR"
VALID_DAYS = 825
RENEW_DAYS = 30
"""A certificate that expires within this many days is made again."""
SERVER_NAMES = ("localhost",)
SERVER_ADDRESSES = ("127.0.0.1",)


class LocalAuthority:
    """A CA and one server certificate it signed, in ``directory``."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self._lock = threading.Lock()
        self._context: ssl.SSLContext | None = None
        self._ensure()

    @property
    def ca_path(self) -> Path:
        """What a client trusts."""
        return self.directory / "ca.crt"

    @property
    def ca_pem(self) -> bytes:
        return self.ca_path.read_bytes()

    def server_context(self) -> ssl.SSLContext:
        """The context servers of the stack wrap their sockets with."""
        with self._lock:
            if self._context is None:
                context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
                context.load_cert_chain(
                    self.directory / "server.crt", self.directory / "server.key"
                )
                self._context = context
            return self._context

    @property
    def bundle_path(self) -> Path:
        """The public CAs (certifi's, as requests trusts by default) and this one: what a
        process given ``REQUESTS_CA_BUNDLE`` trusts, as a container with a private CA added
        to its trust store would."""
        return self.directory / "bundle.pem"

    def client_context(self) -> ssl.SSLContext:
        """A client's context that trusts this CA (for tools without a CA bundle setting)."""
        return ssl.create_default_context(cafile=str(self.ca_path))

    # Making the files ---------------------------------------------------------------------

    def _ensure(self) -> None:
        """Make the files unless they are there and valid; one process at a time (stacks
        sharing the directory may start together)."""
        self.directory.mkdir(parents=True, exist_ok=True)
        with open(self.directory / ".lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            self._make_unless_fresh()

    def _make_unless_fresh(self) -> None:
        ca_key_path, server_key_path = self.directory / "ca.key", self.directory / "server.key"
        server_path = self.directory / "server.crt"
        if not (_fresh(self.ca_path) and _fresh(server_path)):
            ca_key = ec.generate_private_key(ec.SECP256R1())
            ca = _certificate(
                subject="lab spawner local stack CA",
                key=ca_key,
                issuer_key=ca_key,
                issuer=None,
                ca=True,
            )
            server_key = ec.generate_private_key(ec.SECP256R1())
            server = _certificate(
                subject="lab spawner local stack",
                key=server_key,
                issuer_key=ca_key,
                issuer=ca,
                ca=False,
            )
            _write_key(ca_key_path, ca_key)
            _write_key(server_key_path, server_key)
            _write(server_path, server.public_bytes(serialization.Encoding.PEM))
            _write(self.ca_path, ca.public_bytes(serialization.Encoding.PEM))
        public = Path(certifi.where()).read_bytes()
        bundle = public.rstrip(b"\n") + b"\n" + self.ca_path.read_bytes()
        if not self.bundle_path.exists() or self.bundle_path.read_bytes() != bundle:
            _write(self.bundle_path, bundle)


def _fresh(path: Path) -> bool:
    try:
        certificate = x509.load_pem_x509_certificate(path.read_bytes())
    except (OSError, ValueError):
        return False
    remaining = certificate.not_valid_after_utc - dt.datetime.now(dt.UTC)
    return remaining > dt.timedelta(days=RENEW_DAYS)


def _certificate(
    *,
    subject: str,
    key: ec.EllipticCurvePrivateKey,
    issuer_key: ec.EllipticCurvePrivateKey,
    issuer: x509.Certificate | None,
    ca: bool,
) -> x509.Certificate:
    now = dt.datetime.now(dt.UTC)
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)])
    builder = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(issuer.subject if issuer is not None else name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=VALID_DAYS))
        .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), False)
    )
    if ca:
        usage = x509.KeyUsage(
            digital_signature=True,
            content_commitment=False,
            key_encipherment=False,
            data_encipherment=False,
            key_agreement=False,
            key_cert_sign=True,
            crl_sign=True,
            encipher_only=False,
            decipher_only=False,
        )
        builder = builder.add_extension(usage, critical=True)
    else:
        names: list[x509.GeneralName] = [x509.DNSName(n) for n in SERVER_NAMES]
        names += [x509.IPAddress(ipaddress.ip_address(a)) for a in SERVER_ADDRESSES]
        builder = (
            builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
            .add_extension(
                x509.AuthorityKeyIdentifier.from_issuer_public_key(issuer_key.public_key()),
                critical=False,
            )
        )
    return builder.sign(issuer_key, hashes.SHA256())


def _write_key(path: Path, key: ec.EllipticCurvePrivateKey) -> None:
    data = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    _write(path, data, mode=0o600)


def _write(path: Path, data: bytes, mode: int = 0o644) -> None:
    """Write atomically: a reader never sees half a file."""
    temporary = path.with_suffix(path.suffix + ".tmp")
    temporary.write_bytes(data)
    os.chmod(temporary, mode)
    os.replace(temporary, path)


_shared: LocalAuthority | None = None
_shared_lock = threading.Lock()


def shared_authority() -> LocalAuthority:
    """The process's authority: the one ``DEVSTACK_TLS_DIR`` names, else one in a temporary
    directory made for this process (and removed when it ends)."""
    global _shared
    with _shared_lock:
        if _shared is None:
            named = os.environ.get(TLS_DIR_ENV)
            if named:
                _shared = LocalAuthority(Path(named))
            else:
                directory = Path(tempfile.mkdtemp(prefix="devstack-tls-"))
                atexit.register(shutil.rmtree, directory, True)
                _shared = LocalAuthority(directory)
        return _shared


def authority_for(state_dir: Path) -> LocalAuthority:
    """A stack's authority: the process's when ``DEVSTACK_TLS_DIR`` is set, else the one in
    its state directory."""
    if os.environ.get(TLS_DIR_ENV):
        return shared_authority()
    return LocalAuthority(state_dir / "tls")
