"""Data-plane backends behind one interface (`base.DataPlane`): `kernel`, `bmv2`, `p4-ebpf`."""
