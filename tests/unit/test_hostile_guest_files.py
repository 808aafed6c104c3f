"""What the host reads of an `api.network` lab-kernel guest, whose root anyone at the
block's code holds: its console lines are bounded, its log is read through no link and
escaped, its captures are copied through no link and within their budget. Each test
plays guest root on a temporary share."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

import pathdiv.analysis.safefiles as safefiles
import pathdiv.experiments.api.wire as wire
from pathdiv.experiments.api import lab
from pathdiv.experiments.api.lab_serve import CAPTURES_DIR, LOG_FILE


class TestAnEndlessConsoleLineIsDropped:
    def test_a_line_past_the_bound_is_dropped_up_to_its_end_and_the_next_answer_read(self):
        lines = wire.Lines(limit=1000)
        taken = 0
        for _ in range(200):  # 200 kB without a newline: never held whole
            assert lines.feed(b"x" * 1000) == []
            taken = max(taken, len(lines.buffer))
        assert taken <= 1000
        answer = wire.answer(3, {"ok": 1}).decode()
        got = lines.feed(b"tail of the long line\n" + answer.encode())
        assert [wire.parse_answer(line) for line in got] == [{"id": 3, "ok": {"ok": 1}}]
        assert lines.dropped == 1

    def test_a_long_line_in_one_read_is_dropped_and_lines_beside_it_kept(self):
        lines = wire.Lines(limit=10)
        assert lines.feed(b"short\n" + b"y" * 50 + b"\nnext\n") == ["short", "next"]
        assert lines.dropped == 1


class TestTheGuestLogIsReadAsHostile:
    def test_a_log_linked_to_a_root_only_file_is_not_printed(self, tmp_path):
        secret = tmp_path / "shadow"
        secret.write_text("root:$6$secret-hash:19000::::::\n")
        secret.chmod(0o600)
        share = tmp_path / "share"
        share.mkdir()
        (share / LOG_FILE).symlink_to(secret)
        tail = lab.guest_log_tail(share)
        assert "secret-hash" not in tail and "symbolic link" in tail

    def test_a_huge_log_gives_its_tail_escaped(self, tmp_path):
        (tmp_path / LOG_FILE).write_bytes(b"a" * 5_000_000 + b"\x1b]0;owned\x07end\n")
        tail = lab.guest_log_tail(tmp_path)
        assert len(tail) <= lab.LOG_TAIL_BYTES * 4 and tail.endswith("\\x07end\n")
        assert "\x1b" not in tail

    def test_a_fifo_as_log_does_not_hang(self, tmp_path):
        os.mkfifo(tmp_path / LOG_FILE)
        started = time.monotonic()
        assert "not read" in lab.guest_log_tail(tmp_path)
        assert time.monotonic() - started < 5


@pytest.fixture
def share(tmp_path: Path) -> Path:
    folder = tmp_path / "share" / CAPTURES_DIR / "1"
    folder.mkdir(parents=True)
    return tmp_path / "share"


class TestGuestCapturesAreCopiedAsHostile:
    def test_a_capture_linked_to_a_root_only_file_is_not_copied(self, tmp_path, share):
        secret = tmp_path / "shadow"
        secret.write_text("root:$6$secret-hash")
        (share / CAPTURES_DIR / "1" / "h1.pcap").write_bytes(b"\xd4\xc3\xb2\xa1" + bytes(60))
        (share / CAPTURES_DIR / "1" / "e1.pcap").symlink_to(secret)
        out = tmp_path / "out"
        assert lab.copy_captures(share, "1", out, budget_mb=1) == ["h1.pcap"]
        assert sorted(p.name for p in out.iterdir()) == ["h1.pcap"]

    def test_captures_past_the_budget_are_not_copied(self, tmp_path, share):
        (share / CAPTURES_DIR / "1" / "a.pcap").write_bytes(bytes(600_000))
        (share / CAPTURES_DIR / "1" / "b.pcap").write_bytes(bytes(600_000))
        os.mkfifo(share / CAPTURES_DIR / "1" / "c.pcap")
        out = tmp_path / "out"
        assert lab.copy_captures(share, "1", out, budget_mb=1) == ["a.pcap"]
        assert [p.name for p in out.iterdir()] == ["a.pcap"]

    def test_a_link_planted_at_the_destination_is_replaced_not_written_through(
            self, tmp_path, share):
        (share / CAPTURES_DIR / "1" / "h1.pcap").write_bytes(b"guest bytes")
        victim = tmp_path / "victim"
        victim.write_text("root's file")
        out = tmp_path / "out"
        out.mkdir()
        (out / "h1.pcap").symlink_to(victim)
        assert lab.copy_captures(share, "1", out, budget_mb=1) == ["h1.pcap"]
        assert victim.read_text() == "root's file"
        assert (out / "h1.pcap").read_bytes() == b"guest bytes"

    def test_a_captures_folder_that_is_a_link_is_refused(self, tmp_path):
        (tmp_path / "share" / CAPTURES_DIR).mkdir(parents=True)
        elsewhere = tmp_path / "elsewhere"
        elsewhere.mkdir()
        (elsewhere / "x.pcap").write_text("host file")
        (tmp_path / "share" / CAPTURES_DIR / "1").symlink_to(elsewhere)
        with pytest.raises(safefiles.FileRefused, match="symbolic link"):
            lab.copy_captures(tmp_path / "share", "1", tmp_path / "out", budget_mb=1)
