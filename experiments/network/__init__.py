"""The assembled network: the topology object's nodes and links built from the fabric's
parts, with a data plane (`network.Network`), its link captures (`captures`) and what
lets one network serve several runs (`reuse`)."""
