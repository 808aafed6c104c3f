"""The messages between a host's `api.network(...)` and the lab kernel's guest serving it
(experiments/api/lab.py, lab_serve.py): one JSON object a line over the guest's console.

The host writes requests, `{"id": n, "op": name, "args": {...}}`; the guest answers
each with one line `MARK + {"id": n, "ok": value}` or `MARK + {"id": n, "error": text,
"kind": name}`, and greets once with `MARK + {"id": 0, "ok": {...}}` when its network is
up. Lines without the mark (a tool writing to the console after all) are not answers.
Pure: no I/O here.
"""

from __future__ import annotations

import json
from typing import Any

MARK = "@pathdiv-rpc "
OPS = ("transfer", "link_bytes", "cmd", "capture_start", "capture_stop", "close")
# Exceptions a request may raise in the guest that the host raises as such (a caller
# catches a bad host name as KeyError on either kernel); any other is a NetworkError.
KINDS = ("KeyError", "ValueError")


class WireError(ValueError):
    """A line that is not a message of this protocol."""


def request(n: int, op: str, **args: Any) -> bytes:
    """Request line `n` for `op`."""
    if op not in OPS:
        raise WireError(f"op {op!r}: expected one of {', '.join(OPS)}")
    return (json.dumps({"id": n, "op": op, "args": args}) + "\n").encode()


def parse_request(line: str) -> tuple[int, str, dict[str, Any]]:
    """(id, op, args) of a request line."""
    try:
        doc = json.loads(line)
        n, op, args = int(doc["id"]), str(doc["op"]), dict(doc.get("args") or {})
    except (ValueError, KeyError, TypeError) as exc:
        raise WireError(f"not a request: {line[:200]!r} ({exc})") from None
    if op not in OPS:
        raise WireError(f"op {op!r}: expected one of {', '.join(OPS)}")
    return n, op, args


def answer(n: int, value: Any = None, error: BaseException | None = None) -> bytes:
    """The guest's answer line to request `n`: its value, or the error it raised."""
    if error is None:
        doc: dict[str, Any] = {"id": n, "ok": value}
    else:
        kind = type(error).__name__
        text = error.args[0] if isinstance(error, KeyError) and error.args else str(error)
        doc = {"id": n, "error": str(text), "kind": kind if kind in KINDS else "NetworkError"}
    return (MARK + json.dumps(doc) + "\n").encode()


def parse_answer(line: str) -> dict[str, Any] | None:
    """The answer a console line holds, or None for a line that is no answer."""
    start = line.find(MARK)
    if start < 0:
        return None
    try:
        doc = json.loads(line[start + len(MARK):])
    except ValueError:
        return None
    return doc if isinstance(doc, dict) and "id" in doc else None


MAX_LINE_BYTES = 16 << 20  # an answer (a transfer with its links' bytes) is a few kB


class Lines:
    """Bytes read from the console, cut into lines (CR LF or LF; partial lines kept).

    The guest's console is written by guest root, so a line is bounded: one longer than
    MAX_LINE_BYTES is dropped, up to its end, and counted in `dropped` (it is no answer
    of this protocol), so an endless line cannot exhaust the host's memory."""

    def __init__(self, limit: int = MAX_LINE_BYTES) -> None:
        self.buffer = b""
        self.limit = limit
        self.skipping = False  # inside a line already too long
        self.dropped = 0

    def feed(self, data: bytes) -> list[str]:
        *lines, rest = (self.buffer + data).split(b"\n")
        if self.skipping and lines:  # the too-long line ends here
            lines, self.skipping = lines[1:], False
        if self.skipping or len(rest) > self.limit:
            self.dropped += not self.skipping
            self.skipping, rest = True, b""
        self.buffer = rest
        kept = [raw for raw in lines if len(raw) <= self.limit]
        self.dropped += len(lines) - len(kept)
        return [raw.rstrip(b"\r").decode(errors="replace") for raw in kept]


# ---- a transfer's result as JSON and back (tuples become lists on the wire) -----------
def transfer_doc(t: Any) -> dict[str, Any]:
    """A `Transfer` as JSON-ready data."""
    return {"src": t.src, "dst": t.dst, "size": t.size, "transport": t.transport,
            "fct_s": t.fct_s, "goodput_mbps": t.goodput_mbps, "received": t.received,
            "paths": [list(p) for p in t.paths],
            "path_bytes": [[list(p), n] for p, n in t.path_bytes.items()],
            "link_bytes": link_bytes_doc(t.link_bytes), "record": t.record}


def transfer_fields(doc: dict[str, Any]) -> dict[str, Any]:
    """The keyword arguments of `Transfer` from `transfer_doc`'s data."""
    return {"src": doc["src"], "dst": doc["dst"], "size": int(doc["size"]),
            "transport": doc["transport"], "fct_s": float(doc["fct_s"]),
            "goodput_mbps": float(doc["goodput_mbps"]), "received": int(doc["received"]),
            "paths": [tuple(p) for p in doc["paths"]],
            "path_bytes": {tuple(p): int(n) for p, n in doc["path_bytes"]},
            "link_bytes": link_bytes_of(doc["link_bytes"]), "record": dict(doc["record"])}


def link_bytes_doc(link_bytes: dict[tuple[str, str], int]) -> list[list[Any]]:
    return [[a, b, n] for (a, b), n in link_bytes.items()]


def link_bytes_of(doc: list[list[Any]]) -> dict[tuple[str, str], int]:
    return {(str(a), str(b)): int(n) for a, b, n in doc}
