"""The nftables plane (`dataplane: nftables`, formerly `kernel`): Linux forwarding in each
switch's namespace, the up-group member chosen by nftables. `rules.py`: routes, rules and
each mode's nftables ruleset (pure); `hashing.py`: the member nft's jhash picks (pure);
`plane.py`: the switches of one network and the plane's implementation."""
