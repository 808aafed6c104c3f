"""The p4-ebpf plane (`dataplane: p4-ebpf`): the P4 programs as eBPF at tc. `tools.py` finds
p4c-ebpf, its runtime headers, clang, llc and libbpf; `programs.py` compiles p4src/ for
PSA (with `release.py`'s edit of the generated C); `btf.py` and `layout.py` read the
object's map layouts, `entries.py` turns the shared entries into map bytes, `libbpf.py`
loads and fills them, `scrub.py` is the cb scrubber; `plane.py` drives the switches of one
network. What both P4 planes share is in `../p4/`."""
