"""What both P4 planes (bmv2, p4-ebpf) share: the programs' sources and cache
(`sources.py`), the table entries computed from the topology (`entries.py`) and the member
ecmp.p4 picks (`hashing.py`). Each plane's own code is in `../bmv2/` and `../p4ebpf/`."""
