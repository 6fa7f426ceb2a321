"""The ``sample`` spec language: the generators of realistic tokens and look-alikes each row of the token table
(``samples``, ``lookalikes``) and of the context table (archive/secret_context.py) carries; tests and docs expand
them, a redaction never does."""

from __future__ import annotations

import base64
import json
import random
import re
import string
from collections.abc import Callable

from lantern import lazy_re

CLASSES = {
    "A": string.ascii_letters + string.digits,
    "a": string.ascii_lowercase + string.digits,
    "U": string.ascii_uppercase + string.digits,
    "h": "0123456789abcdef",
    "H": "0123456789ABCDEF",
    "d": string.digits,
    "L": string.ascii_letters,
    "l": string.ascii_lowercase,
    "w": string.ascii_letters + string.digits + "_-",
    "b": string.ascii_letters + string.digits + "+/",
    "B": "QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L",  # bech32
    "p": string.ascii_letters + string.digits + "!#%&*+-=?@^_~",  # a password's characters (no quote, $, space)
}
_SPEC = lazy_re.compile(r"\{\{|\}\}|\{(?:(\d+)(?:-(\d+))?:([A-Za-z])|([a-z0-9]+))\}")


def _chars(rng: random.Random, n: int, alphabet: str) -> str:
    letters, digits = any(c.isalpha() for c in alphabet), any(c.isdigit() for c in alphabet)
    while True:  # a token of 8+ characters of an alphabet with both has a letter and a digit (as real ones do)
        s = "".join(rng.choice(alphabet) for _ in range(n))
        if n < 8 or ((not letters or any(c.isalpha() for c in s)) and (not digits or any(c.isdigit() for c in s))):
            return s


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def _pem(rng: random.Random, label: str) -> str:
    lines = "\n".join(_chars(rng, 64, CLASSES["b"]) for _ in range(6))
    return f"-----BEGIN {label}-----\n{lines}\n-----END {label}-----\n"


def _jwt(rng: random.Random) -> str:
    def part(obj: dict) -> str:
        return base64.urlsafe_b64encode(json.dumps(obj).encode()).decode().rstrip("=")

    claims = {"sub": _chars(rng, 10, CLASSES["a"]), "iat": rng.randrange(10**9, 2 * 10**9)}
    return f"{part({'alg': 'HS256', 'typ': 'JWT'})}.{part(claims)}.{_chars(rng, 43, CLASSES['w'])}"


def _uuid4(rng: random.Random) -> str:
    import uuid  # a generator for tests and docs: never imported by a redaction

    return str(uuid.UUID(int=rng.getrandbits(128), version=4))


_NAMED: dict[str, Callable[[random.Random], str]] = {
    "uuid": _uuid4,
    "jwt": _jwt,
    "jwtb64": lambda rng: _b64(_jwt(rng).encode()).rstrip("="),
    "pem64": lambda rng: _b64(_pem(rng, rng.choice(("RSA PRIVATE KEY", "PRIVATE KEY", "EC PRIVATE KEY"))).encode()),
    "cert64": lambda rng: _b64(_pem(rng, "CERTIFICATE").encode()),
    "basic": lambda rng: _b64(f"{_chars(rng, 8, CLASSES['l'])}:{_chars(rng, 16, CLASSES['p'])}".encode()),
    "cftunnel": lambda rng: _b64(
        json.dumps(
            {
                "a": _chars(rng, 32, CLASSES["h"]),
                "t": _uuid4(rng),
                "s": _b64(rng.randbytes(32)),
            },
            separators=(",", ":"),
        ).encode()
    ),
}


def sample(spec: str, rng: random.Random, parts: list[str] | None = None) -> str:
    """A text made from ``spec``: its literal characters, and for each ``{N:C}`` (``{N-M:C}``: N to M) that many
    random characters of class ``C`` (``CLASSES``: A alphanumeric, a lower-case alphanumeric, U upper-case
    alphanumeric, h / H hex, d digits, L / l letters, w base64url, b base64, B bech32, p a password's characters;
    8 or more of a class with letters and digits hold both), and for ``{uuid}``, ``{jwt}``, ``{jwtb64}`` (a JWT in
    base64), ``{pem64}`` / ``{cert64}`` (a PEM private key / certificate in base64, as kubeconfig holds them),
    ``{basic}`` (HTTP Basic credentials: base64 of ``user:password``) and ``{cftunnel}`` (a Cloudflare tunnel
    token) one such value; ``{{`` and ``}}`` are braces. ``parts``: a list the random pieces drawn are appended
    to (what a test looks for after redaction). Raises KeyError for an unknown class or name."""

    def one(m: re.Match[str]) -> str:
        if m.group() in ("{{", "}}"):
            return m.group()[0]
        if m.group(4):
            piece = _NAMED[m.group(4)](rng)
        else:
            lo = int(m.group(1))
            n = rng.randint(lo, int(m.group(2))) if m.group(2) else lo
            piece = _chars(rng, n, CLASSES[m.group(3)])
        if parts is not None:
            parts.append(piece)
        return piece

    return _SPEC.sub(one, spec)
