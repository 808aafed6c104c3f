"""The p4-ebpf data plane's parts: tools, compilation, BTF layouts, entries as map bytes, libbpf."""
