"""The digest (and, where a key is configured, the signature) every result file carries.

Every results.json and `<kind>.json` the tool writes holds an `integrity` field:

    "integrity": {"canonical": "json-sorted-compact-utf8", "sha256": "<hex>",
                  "signature": {"algorithm": "hmac-sha256" | "ed25519", "key_id": "<hex>", "value": "<hex>"}}

`sha256` is the SHA-256 of the canonical JSON of the file's content without the `integrity` field
(keys sorted, no spaces, UTF-8, no NaN): formatting and key order do not change it, any edit of a
value does. It names an edited file; it does not stop a forger, who can recompute it. The
signature does, where the writer has a key (`PRIVACY_AUDIT_SIGNING_KEY`, see `signing_key`):
an HMAC-SHA256 with a shared secret, or an Ed25519 signature whose public key the gate holds.
Both are over the same canonical bytes. Keys never reach a file or a log: `key_id` is the first 16
hex digits of the SHA-256 of the secret / public key, so a reader can say which key signed.

Pure functions except `signing_key` / `verification_key`, which read the environment (and the
PEM file it names) and nothing else.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from audit.errors import AuditInputError

__all__ = [
    "CANONICAL",
    "ENV_KEY",
    "ENV_VERIFY",
    "FIELD",
    "IntegrityOutcome",
    "SigningKey",
    "canonical_bytes",
    "check_integrity",
    "content_digest",
    "signing_key",
    "verification_key",
    "with_integrity",
]

FIELD = "integrity"
CANONICAL = "json-sorted-compact-utf8"
ENV_KEY = "PRIVACY_AUDIT_SIGNING_KEY"
ENV_VERIFY = "PRIVACY_AUDIT_VERIFY_KEY"
_ED25519_PREFIX = "ed25519:"
_MIN_SECRET = 16


def canonical_bytes(content: dict[str, Any]) -> bytes:
    """The bytes the digest and the signature cover: `content` without `integrity`, keys sorted, compact."""
    body = {k: v for k, v in content.items() if k != FIELD}
    return json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode("utf-8")


def content_digest(content: dict[str, Any]) -> str:
    return hashlib.sha256(canonical_bytes(content)).hexdigest()


@dataclass(frozen=True)
class SigningKey:
    """A configured key: `algorithm` hmac-sha256 (secret bytes) or ed25519 (a private or public key object)."""

    algorithm: str
    key_id: str
    secret: bytes | None = None
    private: Any = None
    public: Any = None

    def _hmac(self, data: bytes) -> str:
        if self.secret is None:  # an hmac-sha256 key is always made with its secret
            raise ValueError("an HMAC signing key without its secret")
        return hmac.new(self.secret, data, hashlib.sha256).hexdigest()

    def sign(self, data: bytes) -> str:
        if self.algorithm == "hmac-sha256":
            return self._hmac(data)
        return self.private.sign(data).hex()

    def verify(self, data: bytes, value: str) -> bool:
        if self.algorithm == "hmac-sha256":
            return hmac.compare_digest(self._hmac(data), str(value))
        from cryptography.exceptions import InvalidSignature

        try:
            self.public.verify(bytes.fromhex(str(value)), data)
        except (InvalidSignature, ValueError):
            return False
        return True


def _key_id(material: bytes) -> str:
    return hashlib.sha256(material).hexdigest()[:16]


def _ed25519_public_id(public: Any) -> str:
    from cryptography.hazmat.primitives import serialization

    raw = public.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return _key_id(raw)


def _read_pem(path_text: str, variable: str) -> bytes:
    path = Path(path_text).expanduser()
    try:
        if not path.is_file():
            raise AuditInputError(f"environment variable {variable}", f"names '{path}', which is not a regular file")
        data = path.read_bytes()[:65536]
    except OSError as exc:
        raise AuditInputError(
            f"environment variable {variable}", f"names '{path}', which cannot be read ({exc.strerror})"
        ) from None
    return data


def signing_key(environ: Mapping[str, str] | None = None) -> SigningKey | None:
    """The key result files are signed with: `PRIVACY_AUDIT_SIGNING_KEY` = a secret of ≥ 16 characters
    (HMAC-SHA256), or `ed25519:/path/to/private.pem` (an unencrypted PKCS#8 Ed25519 private key).
    None when the variable is unset or empty. A malformed key is bad input (exit 2 naming the variable)."""
    env: Mapping[str, str] = os.environ if environ is None else environ
    value = env.get(ENV_KEY, "")
    if not value:
        return None
    if value.startswith(_ED25519_PREFIX):
        from cryptography.hazmat.primitives import serialization
        from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

        data = _read_pem(value[len(_ED25519_PREFIX) :], ENV_KEY)
        try:
            private = serialization.load_pem_private_key(data, password=None)
        except (ValueError, TypeError):
            private = None
        if not isinstance(private, Ed25519PrivateKey):
            raise AuditInputError(
                f"environment variable {ENV_KEY}", "names a file that is not an unencrypted PEM Ed25519 private key"
            )
        public = private.public_key()
        return SigningKey("ed25519", _ed25519_public_id(public), private=private, public=public)
    secret = value.encode("utf-8")
    if len(secret) < _MIN_SECRET:
        raise AuditInputError(
            f"environment variable {ENV_KEY}",
            f"is {len(secret)} bytes long: an HMAC secret "
            f"needs at least {_MIN_SECRET} (or give ed25519:/path/to/private.pem)",
        )
    return SigningKey("hmac-sha256", _key_id(secret), secret=secret)


def verification_key(environ: Mapping[str, str] | None = None) -> SigningKey | None:
    """The key `gate` and `report` check signatures with: `PRIVACY_AUDIT_VERIFY_KEY` = a PEM Ed25519
    public key file, else the signing key of `PRIVACY_AUDIT_SIGNING_KEY` (the HMAC secret, or the
    public half of the Ed25519 private key). None when neither is set."""
    env: Mapping[str, str] = os.environ if environ is None else environ
    path = env.get(ENV_VERIFY, "")
    if path:
        from cryptography.hazmat.primitives import serialization
        from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

        data = _read_pem(path, ENV_VERIFY)
        try:
            public = serialization.load_pem_public_key(data)
        except (ValueError, TypeError):
            public = None
        if not isinstance(public, Ed25519PublicKey):
            raise AuditInputError(
                f"environment variable {ENV_VERIFY}", "names a file that is not a PEM Ed25519 public key"
            )
        return SigningKey("ed25519", _ed25519_public_id(public), public=public)
    return signing_key(env)


def with_integrity(content: dict[str, Any], key: SigningKey | None) -> dict[str, Any]:
    """`content` with a fresh `integrity` field (any old one replaced), signed when `key` is given."""
    body = {k: v for k, v in content.items() if k != FIELD}
    data = canonical_bytes(body)
    integrity: dict[str, Any] = {"canonical": CANONICAL, "sha256": hashlib.sha256(data).hexdigest()}
    if key is not None:
        integrity["signature"] = {"algorithm": key.algorithm, "key_id": key.key_id, "value": key.sign(data)}
    return {**body, FIELD: integrity}


@dataclass(frozen=True)
class IntegrityOutcome:
    """What the reader found. `state`: "intact", "edited" or "no digest"; `signature`: "valid",
    "invalid" (wrong key or forged), "unsigned" or "not checked" (no key configured here)."""

    state: str
    signature: str
    sentence: str
    key_id: str | None = None

    @property
    def edited(self) -> bool:
        return self.state == "edited"

    def as_dict(self) -> dict[str, Any]:
        return {"state": self.state, "signature": self.signature, "sentence": self.sentence, "key_id": self.key_id}


def check_integrity(content: dict[str, Any], key: SigningKey | None, *, what: str = "the file") -> IntegrityOutcome:
    """Recompute the digest of `content` and check its signature against `key` (pure)."""
    stored = content.get(FIELD)
    if stored is None:
        return IntegrityOutcome(
            "no digest",
            "unsigned",
            f"{what} has no digest (written by an older version): "
            "it cannot be told apart from an edited file; judged from its numbers",
        )
    if not isinstance(stored, dict) or not isinstance(stored.get("sha256"), str):
        return IntegrityOutcome(
            "edited", "invalid", f"{what} was edited after privacy-audit wrote it: its 'integrity' field is malformed"
        )
    data = canonical_bytes(content)
    if not hmac.compare_digest(hashlib.sha256(data).hexdigest(), stored["sha256"]):
        return IntegrityOutcome(
            "edited",
            "invalid",
            f"{what} was edited after privacy-audit wrote it: its content "
            "no longer matches the SHA-256 digest written with it",
        )
    signature = stored.get("signature")
    if signature is None:
        return IntegrityOutcome("intact", "unsigned", f"{what} matches its digest; it is not signed")
    if not isinstance(signature, dict):
        return IntegrityOutcome("intact", "invalid", f"{what} carries a malformed signature")
    key_id = str(signature.get("key_id"))[:64]
    if key is None:
        return IntegrityOutcome(
            "intact",
            "not checked",
            f"{what} matches its digest; signed ({signature.get('algorithm')}, "
            f"key {key_id}) but no key is configured here to check it",
            key_id,
        )
    if signature.get("algorithm") != key.algorithm or key_id != key.key_id:
        return IntegrityOutcome(
            "intact",
            "invalid",
            f"{what} is signed with another key ({signature.get('algorithm')}, "
            f"key {key_id}; the configured key is {key.algorithm}, key {key.key_id})",
            key_id,
        )
    if not key.verify(data, str(signature.get("value"))):
        return IntegrityOutcome(
            "intact",
            "invalid",
            f"{what} carries a signature that does not verify with the "
            f"configured key ({key.algorithm}, key {key.key_id})",
            key_id,
        )
    return IntegrityOutcome(
        "intact",
        "valid",
        f"{what} matches its digest and is signed by the configured key ({key.algorithm}, key {key.key_id})",
        key_id,
    )
