"""Data-plane backends behind one interface (`base.DataPlane`): `kernel` and `bmv2`."""
