"""The worker's result channel: one JSON object per line, each authenticated.

A line is `<tag> <body>\\n`: body is the JSON of one message, tag the hex HMAC-SHA256 of body's bytes under a key the
parent draws for each worker (32 random bytes) and sends over the command pipe before the worker imports any task or
candidate code. Every request the parent sends carries a sequence number and a random nonce; the reply echoes both
(and a row reply names its row), so a line written for another request cannot be replayed. The parent refuses a line
whose tag, sequence number, nonce, type or row does not match (reason code FORGED) and stops trusting that worker.

The worker side keeps the key out of module globals: `sealer` returns a closure over an HMAC object, and the key's
bytes are dropped once it is built. That stops a candidate that writes into the pipe (it finds the fd in
/proc/self/fd); it does not stop one that reads the worker's memory (the static rules forbid the modules that would).
"""
from __future__ import annotations

import hashlib
import hmac
import json
import secrets

KEY_BYTES = 32
TAG_HEX = 64  # hex digits of an HMAC-SHA256 tag


def new_key() -> bytes:
    return secrets.token_bytes(KEY_BYTES)


def new_nonce() -> str:
    return secrets.token_hex(16)


def sealer(key: bytes):
    """seal(msg) -> the line to write (newline included). The key lives only inside the HMAC object of the closure."""
    proto = hmac.new(key, digestmod=hashlib.sha256)

    def seal(msg: dict) -> str:
        body = json.dumps(msg)
        mac = proto.copy()
        mac.update(body.encode())
        return f"{mac.hexdigest()} {body}\n"

    return seal


def opener(key: bytes):
    """open_line(line bytes, expect) -> (msg, None) or (None, why). `expect`: the keys the message must carry with
    exactly these values (seq, nonce, and for a row its id), checked only after the tag verified."""
    proto = hmac.new(key, digestmod=hashlib.sha256)

    def open_line(line: bytes, expect: dict) -> tuple[dict | None, str | None]:
        shown = line[:120].decode("utf-8", errors="replace").rstrip("\n")
        tag, sep, body = line.rstrip(b"\n").partition(b" ")
        if not sep or len(tag) != TAG_HEX:
            return None, f"a result line without an authentication tag: {shown!r}"
        mac = proto.copy()
        mac.update(body)
        if not hmac.compare_digest(mac.hexdigest().encode(), tag):
            return None, f"a result line whose tag does not verify under this run's key: {shown!r}"
        try:
            msg = json.loads(body)
        except ValueError:
            return None, f"an authenticated line that is not JSON: {shown!r}"
        if not isinstance(msg, dict):
            return None, f"an authenticated line that is not a JSON object: {shown!r}"
        for k, want in expect.items():
            if msg.get(k) != want:
                return None, f"a result line with {k}={msg.get(k)!r} where the parent asked for {want!r}"
        return msg, None

    return open_line
