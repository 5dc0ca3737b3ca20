"""This machine's signing key: one ed25519 key per store, kept outside every archive.

Layout under ``$GITMAIL_HOME``::

    keys/                    owner-only (0700)
      node_ed25519           the private key, OpenSSH format, owner-only (0600)
      node_ed25519.pub       its public line, ``ssh-ed25519 AAAA... gitmail@<node>``
      retired/<key id>       keys replaced by ``gitmail nodes rotate`` (kept to prove the rotation)

The key is made on first use. Two processes starting at once agree on one
key: each writes its candidate to a temporary file and links it into place,
and the first link wins. The key signs every commit the store's archives
write (:meth:`NodeKey.sign_commit`), and is readable by its owner only.
"""

from __future__ import annotations

import os
import secrets
import threading

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from gitmail.model import sshsig

KEYS = "keys"
KEY_FILE = "node_ed25519"
RETIRED = "retired"


class NodeKey:
    """The store's node key: loaded (or made) once, then used to sign in process."""

    def __init__(self, home: str, node: str):
        self.folder = os.path.join(home, KEYS)
        self.node = node
        self.path = os.path.join(self.folder, KEY_FILE)
        self._lock = threading.Lock()
        key = self._load_or_make()
        self._pair = (key, sshsig.raw_public(key))  # replaced whole, so a signer never mixes two keys

    @property
    def public(self) -> bytes:
        """The raw public key (32 bytes)."""
        return self._pair[1]

    @property
    def public_line(self) -> str:
        return sshsig.public_line(self.public)

    def sign(self, data: bytes, *, namespace: str = sshsig.GIT_NAMESPACE) -> str:
        """The armored SSH signature of ``data`` by this node's key."""
        key, public = self._pair
        return sshsig.sign(key, data, namespace=namespace, public=public)

    def sign_commit(self, payload: bytes) -> str:
        """The ``gpgsig`` value of a commit whose bytes (without that header) are ``payload``."""
        return self.sign(payload)

    @property
    def private(self) -> Ed25519PrivateKey:
        """The key itself, to sign something other than a commit (the statement of a rotation)."""
        return self._pair[0]

    def install(self, new: Ed25519PrivateKey) -> None:
        """Put ``new`` in place of the current key, which moves under ``retired/`` (``gitmail nodes rotate``)."""
        with self._lock:
            old = self._pair[0]
            retired = os.path.join(self.folder, RETIRED)
            os.makedirs(retired, mode=0o700, exist_ok=True)
            os.chmod(retired, 0o700)
            kept = os.path.join(retired, sshsig.key_id(self.public))
            if not os.path.exists(kept):
                _write_private(kept, old)
            tmp = f"{self.path}.{os.getpid()}.{secrets.token_hex(4)}.tmp"
            _write_private(tmp, new)
            os.replace(tmp, self.path)
            self._write_public(new)
            self._pair = (new, sshsig.raw_public(new))

    def _load_or_make(self) -> Ed25519PrivateKey:
        os.makedirs(self.folder, mode=0o700, exist_ok=True)
        os.chmod(self.folder, 0o700)
        try:
            return _read_private(self.path)
        except FileNotFoundError:
            pass
        key = Ed25519PrivateKey.generate()
        tmp = f"{self.path}.{os.getpid()}.{secrets.token_hex(4)}.tmp"
        _write_private(tmp, key)
        try:
            os.link(tmp, self.path)  # the first writer wins if two processes race
        except FileExistsError:
            pass
        finally:
            os.unlink(tmp)
        key = _read_private(self.path)
        self._write_public(key)
        return key

    def _write_public(self, key: Ed25519PrivateKey) -> None:
        line = f"{sshsig.public_line(sshsig.raw_public(key))} gitmail@{self.node}\n"
        tmp = f"{self.path}.pub.{os.getpid()}.tmp"
        with open(tmp, "w", encoding="ascii") as handle:
            handle.write(line)
        os.replace(tmp, self.path + ".pub")


def _read_private(path: str) -> Ed25519PrivateKey:
    with open(path, "rb") as handle:
        key = serialization.load_ssh_private_key(handle.read(), password=None)
    if not isinstance(key, Ed25519PrivateKey):
        raise ValueError(f"{path} holds a key that is not ed25519; move it away and a new key is made")
    return key


def _write_private(path: str, key: Ed25519PrivateKey) -> None:
    data = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.OpenSSH,
                             serialization.NoEncryption())
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        os.fchmod(fd, 0o600)
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)
