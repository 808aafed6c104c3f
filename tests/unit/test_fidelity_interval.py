"""On the virtual clock the fidelity monitor samples at most once per guest second."""

from __future__ import annotations

from pathdiv.experiments.fabric.environment import virtual_clock
from pathdiv.experiments.fidelity import runhooks


class _Started:
    def __init__(self, section):
        self.section = section

    def start(self):
        return self


def test_the_virtual_clock_samples_at_most_once_a_second(monkeypatch):
    monkeypatch.setattr(runhooks, "lab_monitor", lambda net, section: _Started(section))
    section = {"enabled": True, "sample_interval_s": 0.2}
    virtual = runhooks.start(object(), section, {"clock": "virtual"})
    real = runhooks.start(object(), section, {"clock": "real"})
    assert virtual.section["sample_interval_s"] == runhooks.VIRTUAL_INTERVAL_S == 1.0
    assert real.section["sample_interval_s"] == 0.2
    slow = runhooks.start(object(), {**section, "sample_interval_s": 5}, {"clock": "virtual"})
    assert slow.section["sample_interval_s"] == 5  # a longer interval is kept
    assert section["sample_interval_s"] == 0.2  # the config is not changed


def test_the_virtual_clock_is_told_by_the_kernels_command_line():
    assert virtual_clock("mem=1536M rootfstype=hostfs quiet time-travel=inf-cpu")
    assert not virtual_clock("BOOT_IMAGE=/vmlinuz root=/dev/vda1 quiet")
