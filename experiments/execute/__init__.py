"""Executing a run: run-folder state, the lab kernel's host and guest sides."""
