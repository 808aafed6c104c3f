"""Run fidelity: did the emulator keep up? Samples (`monitor`) and the verdict (`verdict`)."""
