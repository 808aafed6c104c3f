"""The bmv2 plane (`dataplane: bmv2`): one p4lang `simple_switch` per switch. `tools.py`
finds bmv2 and p4c-bm2-ss, `programs.py` compiles p4src/ for v1model, `switch.py` starts and
stops a switch process, `cli.py` reads what `simple_switch_CLI` prints, `plane.py` drives
the switches of one network. What both P4 planes share is in `../p4/`."""
