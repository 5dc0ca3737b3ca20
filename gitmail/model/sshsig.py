"""SSH signatures (the ``SSHSIG`` format of OpenSSH) with ed25519 keys, made and checked in process.

git signs commits in this format when ``gpg.format=ssh``: the signature of a
commit is the armored blob below, kept in the commit's ``gpgsig`` header, over
the commit's bytes without that header. Making it here (rather than running
``ssh-keygen -Y sign`` per commit) costs one SHA-512 and one ed25519
signature, some tens of microseconds. The wire format::

    "SSHSIG" uint32(1) string(public key blob) string(namespace)
    string(reserved "") string(hash "sha512") string(signature blob)

and the signed data is ``"SSHSIG" string(namespace) string("") string("sha512")
string(SHA-512 of the message)``. A public key is written as OpenSSH writes
it, ``ssh-ed25519 AAAA...``.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import struct

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

MAGIC = b"SSHSIG"
VERSION = 1
KEY_TYPE = b"ssh-ed25519"
HASH = b"sha512"
GIT_NAMESPACE = "git"
BEGIN = "-----BEGIN SSH SIGNATURE-----"
END = "-----END SSH SIGNATURE-----"
_LINE = 70  # OpenSSH wraps the armored base64 at 70 characters


class SignatureError(ValueError):
    """An armored signature or a public key line that cannot be read."""


def _string(data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + data


def _read_string(data: bytes, at: int) -> tuple[bytes, int]:
    if at + 4 > len(data):
        raise SignatureError("truncated")
    size = struct.unpack_from(">I", data, at)[0]
    end = at + 4 + size
    if end > len(data):
        raise SignatureError("truncated")
    return data[at + 4:end], end


def key_blob(raw: bytes) -> bytes:
    """The SSH wire form of an ed25519 public key given as its 32 raw bytes."""
    return _string(KEY_TYPE) + _string(raw)


def raw_public(key: Ed25519PublicKey | Ed25519PrivateKey) -> bytes:
    """The 32 raw bytes of a public key (of a private key's public half)."""
    public = key.public_key() if isinstance(key, Ed25519PrivateKey) else key
    return public.public_bytes_raw()


def public_line(raw: bytes) -> str:
    """The key as OpenSSH writes it: ``ssh-ed25519 <base64 of the blob>``."""
    return "ssh-ed25519 " + base64.b64encode(key_blob(raw)).decode()


def parse_public_line(text: str) -> bytes:
    """The 32 raw bytes of a ``ssh-ed25519 AAAA...`` line (a trailing comment is ignored)."""
    parts = text.strip().split()
    if len(parts) < 2 or parts[0] != "ssh-ed25519":
        raise SignatureError("not an ssh-ed25519 public key line (expected 'ssh-ed25519 AAAA...')")
    try:
        blob = base64.b64decode(parts[1], validate=True)
    except binascii.Error:
        raise SignatureError("the key's base64 does not decode") from None
    kind, at = _read_string(blob, 0)
    raw, at = _read_string(blob, at)
    if kind != KEY_TYPE or len(raw) != 32 or at != len(blob):
        raise SignatureError("not an ssh-ed25519 key blob")
    return raw


def fingerprint(raw: bytes) -> str:
    """The key's fingerprint as ``ssh-keygen -l`` prints it: ``SHA256:<base64, unpadded>``."""
    return "SHA256:" + base64.b64encode(hashlib.sha256(key_blob(raw)).digest()).decode().rstrip("=")


def key_id(raw: bytes) -> str:
    """The key's SHA-256 in hex: a name for it that is safe in a file name."""
    return hashlib.sha256(key_blob(raw)).hexdigest()


def _signed_data(message: bytes, namespace: str) -> bytes:
    return (MAGIC + _string(namespace.encode()) + _string(b"") + _string(HASH)
            + _string(hashlib.sha512(message).digest()))


def sign(key: Ed25519PrivateKey, message: bytes, *, namespace: str = GIT_NAMESPACE,
         public: bytes | None = None) -> str:
    """The armored SSH signature of ``message`` in ``namespace`` (``public``: the key's raw bytes, if known)."""
    raw = public if public is not None else raw_public(key)
    signature = key.sign(_signed_data(message, namespace))
    blob = (MAGIC + struct.pack(">I", VERSION) + _string(key_blob(raw)) + _string(namespace.encode())
            + _string(b"") + _string(HASH) + _string(_string(KEY_TYPE) + _string(signature)))
    text = base64.b64encode(blob).decode()
    lines = [text[at:at + _LINE] for at in range(0, len(text), _LINE)]
    return "\n".join([BEGIN, *lines, END]) + "\n"


def signer_of(armored: bytes | str, message: bytes, *, namespace: str = GIT_NAMESPACE) -> bytes:
    """The raw public key that made this valid signature of ``message``; SignatureError if it is not valid."""
    raw, signature = _read_signature(armored, namespace)
    try:
        Ed25519PublicKey.from_public_bytes(raw).verify(signature, _signed_data(message, namespace))
    except (InvalidSignature, ValueError):
        raise SignatureError("the signature does not match the data") from None
    return raw


def claimed_signer(armored: bytes | str, *, namespace: str = GIT_NAMESPACE) -> bytes:
    """The raw public key a well-formed signature names, not yet checked against any data; SignatureError if malformed.

    Reading it costs a few microseconds where checking costs a hundred, so
    who may write what can be judged by the key a signature names while the
    signature itself is checked elsewhere; :func:`signer_of` has the last word.
    """
    return _read_signature(armored, namespace)[0]


def _read_signature(armored: bytes | str, namespace: str) -> tuple[bytes, bytes]:
    """The raw ed25519 key an armored SSHSIG names and its signature bytes; SignatureError if malformed."""
    text = armored.decode("ascii", "replace") if isinstance(armored, bytes) else armored
    body = text.strip()
    if not body.startswith(BEGIN) or not body.endswith(END):
        raise SignatureError("not an armored SSH signature")
    try:
        blob = base64.b64decode("".join(body[len(BEGIN):-len(END)].split()), validate=True)
    except binascii.Error:
        raise SignatureError("the signature's base64 does not decode") from None
    if blob[:6] != MAGIC or len(blob) < 10 or struct.unpack_from(">I", blob, 6)[0] != VERSION:
        raise SignatureError("not an SSHSIG signature of version 1")
    public, at = _read_string(blob, 10)
    space, at = _read_string(blob, at)
    _reserved, at = _read_string(blob, at)
    algorithm, at = _read_string(blob, at)
    inner, at = _read_string(blob, at)
    kind, key_at = _read_string(public, 0)
    raw, _ = _read_string(public, key_at)
    if kind != KEY_TYPE or len(raw) != 32:
        raise SignatureError("signed by a key that is not ed25519")
    if space != namespace.encode() or algorithm != HASH:
        raise SignatureError(f"made for namespace {space.decode(errors='replace')!r} with "
                             f"{algorithm.decode(errors='replace')}, not {namespace!r} with sha512")
    sig_kind, sig_at = _read_string(inner, 0)
    signature, _ = _read_string(inner, sig_at)
    if sig_kind != KEY_TYPE:
        raise SignatureError("not an ed25519 signature")
    return raw, signature
