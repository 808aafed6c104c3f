"""Malformed and hostile configs, as data: what a careless or hostile student might hand
to `pathdiv check`, and the one line each must be refused with.

Each case is (id, config text, extra command-line arguments, a regular expression the
refusal must match: it names the key, shows the value shortened and says what is
allowed). `tests/unit/test_hostile_configs.py` runs them all through the real entry
point. `{dir}` in text and arguments is the folder of the config; files a case needs
beside its config come from FILES.
"""

from __future__ import annotations

MINIMAL = "name: hostile\n"
LONG_NAME = "x" * 300

# an alias ("billion laughs") bomb: 9 levels of 9 aliases each, 9^9 values expanded
LAUGHS = "a: &a [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n" + "".join(
    f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join([f'*{chr(97 + i)}'] * 9)}]\n"
    for i in range(9))
# the same with two aliases per level and 60 levels: 2^60 values from 120 aliases
DOUBLING = "l0: &l0 [x, x]\n" + "".join(f"l{i}: &l{i} [*l{i - 1}, *l{i - 1}]\n"
                                        for i in range(1, 61))

CASES: list[tuple[str, str | bytes, list[str], str]] = [
    # ---- wrong-shaped sections --------------------------------------------------------
    ("section-as-scalar", "topology: fattree\n", [],
     r"topology: expected a mapping \(key: value lines indented under it\), got 'fattree'"),
    ("workload-as-scalar", "workload: noisy\n", [],
     r"workload: expected a mapping \(key: value lines indented under it\), got 'noisy'"),
    ("section-as-list", "switching: [ecmp, spray]\n", [],
     r"switching: expected a mapping .*, got \['ecmp', 'spray'\]"),
    ("flow-types-as-list", "workload: {flow_types: [query, long]}\n", [],
     r"workload.flow_types: expected a mapping of flow type names, got \['query', 'long'\]"),
    ("factors-as-list", "factors: [switching, transport]\n", [],
     r"factors: expected a mapping .*, got \['switching', 'transport'\]"),
    ("level-as-scalar", "factors: {switching: {ecmp: spray}}\n", [],
     r"factors.switching.ecmp: expected a mapping .*, got 'spray'"),
    ("events-as-mapping", "events: {at_s: 1, link: a1-c1}\n", [],
     r"events: expected a list, got \{'at_s': 1, 'link': 'a1-c1'\}"),
    ("event-as-scalar", "events: [5]\n", [],
     r"events\[0\]: expected a mapping .*, got 5"),
    ("ivs-with-a-list", "factors: {f: {a: {}, b: {}}}\nanalysis: {ivs: [[f]]}\n", [],
     r"analysis.ivs: \[\[...\]\] is not allowed; expected a list of at most 20 names"),
    ("top-level-list", "- name: x\n- seed: 2\n", [],
     r"the top level must be a mapping of keys .*, got \[\{...\}, \{...\}\]"),
    ("top-level-scalar", "just a sentence\n", [],
     r"the top level must be a mapping of keys .*, got 'just a sentence'"),
    ("non-string-key", "1: one\n", [], r"^1: unknown key; valid keys here are name, seed"),
    ("list-as-key", "? [a, b]\n: 1\n", [],
     r"line 1: a key must be a plain name, not a list or mapping"),
    # ---- bad --set values -------------------------------------------------------------
    ("set-invalid-yaml", MINIMAL, ["--set", "switching.mode=[ecmp"],
     r"--set switching.mode=\[ecmp: not valid YAML: line \d, column \d: (did not find )?"
     r"expected ',' or ']'"),
    ("set-python-tag", MINIMAL, ["--set", "name=!!python/object/apply:os.system [id]"],
     r"--set name=!!python/object/apply:os.system \[id\]: line 1: the tag "
     r"'tag:yaml.org,2002:python/object/apply:os.system' is not allowed; a config holds "
     r"plain"),
    ("set-binary-tag", MINIMAL, ["--set", "name=!!binary aGVsbG8="],
     r"--set name=!!binary aGVsbG8=: line 1: the tag 'tag:yaml.org,2002:binary' is not "
     r"allowed"),
    ("set-no-equals", MINIMAL, ["--set", "switching.mode"],
     r"--set 'switching.mode': expected KEY=VALUE"),
    ("set-unknown-key", MINIMAL, ["--set", "topology.k.x=1"],
     r"--set topology.k.x: unknown key; see `pathdiv keys`"),
    ("set-section-scalar", MINIMAL, ["--set", "topology=fattree"],
     r"topology: expected a mapping .*, got 'fattree'"),
    # ---- depth and alias bombs, tags, duplicate keys, huge values ---------------------
    ("depth-bomb-flow", "a: " + "[" * 50_000 + "]" * 50_000 + "\n", [],
     r"line 1: nested more than 32 levels deep; a config needs a few"),
    ("depth-bomb-block", "".join("  " * i + f"k{i}:\n" for i in range(200)), [],
     r"line 33: nested more than 32 levels deep"),
    ("billion-laughs", LAUGHS, [],
     r"line \d+: with its aliases \(\*name\) expanded the config has more than 100000 "
     r"values; a config has a few hundred \(an alias bomb\?\)"),
    ("doubling-bomb", DOUBLING, [],
     r"with its aliases \(\*name\) expanded the config has more than 100000 values"),
    ("laughs-in-a-key", "name: &n [a, b]\nseed: *n\n", [],
     r"name: \['a', 'b'\] is a list; expected string"),
    ("recursive-alias", "factors: &f {x: *f}\n", [],
     r"line 1: an alias refers to a node that contains it; a config cannot be recursive"),
    ("python-tag", "name: !!python/object/apply:os.system [id]\n", [],
     r"line 1: the tag 'tag:yaml.org,2002:python/object/apply:os.system' is not allowed"),
    ("set-tag", "workload: {flow_types: !!set {a: null}}\n", [],
     r"line 1: the tag 'tag:yaml.org,2002:set' is not allowed"),
    ("local-tag", "name: !shell rm\n", [], r"line 1: the tag '!shell' is not allowed"),
    ("duplicate-top-key", "seed: 1\nname: a\nseed: 2\n", [],
     r"line 3: the key 'seed' is given twice in the same mapping; each key once"),
    ("duplicate-nested-key", "topology:\n  k: 4\n  k: 6\n", [],
     r"line 3: the key 'k' is given twice in the same mapping"),
    ("huge-integer", "seed: " + "9" * 5000 + "\n", [],
     r"line 1: an integer of 5000 digits; at most 30"),
    ("huge-string", "name: " + "a" * 2000 + "\n", [],
     r"name: 'aaaa.*\.\.\. is 2000 characters long; at most 1000"),
    ("not-utf8", b"name: caf\xe9\n", [], r"is not UTF-8 text \(byte 9 is 0xe9\)"),
    ("invalid-yaml", "topology: {k: 4\n", [],
     r"not valid YAML: line 2, column 1: (did not find )?expected ',' or '}'"),
    ("many-unknown-keys", "".join(f"key{i}: 1\n" for i in range(5000)), [],
     r"key0: unknown key; valid keys here are name, seed"),
    # ---- empty maps -------------------------------------------------------------------
    ("empty-flow-types", "workload: {flow_types: {}}\n", [],
     r"workload.flow_types: \{\} is empty; name at least 1 entry, or leave "
     r"workload.flow_types out for the defaults \(query, short, long\)"),
    ("factor-without-levels", "factors: {switching: {}}\n", [],
     r"factors.switching: \{\} is empty; give at least 1 entry"),
    # ---- non-finite and absurd numbers ------------------------------------------------
    ("inf-rate", "topology: {links: {host: {bw_mbps: .inf}}}\n", [],
     r"topology.links.host.bw_mbps: inf is not allowed; expected a finite number"),
    ("nan-timeout", "workload: {timeout_s: .nan}\n", [],
     r"workload.timeout_s: nan is not allowed; expected a finite number"),
    ("minus-inf-event", "events: [{at_s: -.inf, link: a1-c1, action: down}]\n", [],
     r"events\[0\].at_s: -inf is not allowed; expected a finite number"),
    ("repetitions-million", "repetitions: 1000000\n", [],
     r"repetitions: 1000000 is not allowed; expected an integer >= 1 and <= 1000"),
    ("iterations-1e9-text", "workload: {iterations: 1e9}\n", [],
     r"workload.iterations: '1e9' is a str; expected integer"),
    ("iterations-billion", "workload: {iterations: 1000000000}\n", [],
     r"workload.iterations: 1000000000 is not allowed; expected an integer >= 1 and <= 1000"),
    ("k-58", "topology: {k: 58}\n", [],
     r"topology.k: 58 is not allowed; expected an even integer 2..16"),
    ("queue-absurd", "topology: {links: {core: {queue_pkts: 100000000}}}\n", [],
     r"topology.links.core.queue_pkts: 100000000 is not allowed; expected an integer "
     r">= 1 and <= 100000 \(packets\)"),
    ("guest-memory-absurd", "lab: {memory_mb: 10000000}\n", [],
     r"lab.memory_mb: 10000000 is not allowed; expected auto or an integer >= 256 and "
     r"<= 22528 \(MB\)"),
    ("snaplen-absurd", "capture: {snaplen: 10000000}\n", [],
     r"capture.snaplen: 10000000 is not allowed; expected an integer >= 64 and <= 65535"),
    ("sample-interval-tiny", "fidelity: {sample_interval_s: 0.000001}\n", [],
     r"fidelity.sample_interval_s: 1e-06 is not allowed; expected a number >= 0.05 and "
     r"<= 60 \(s\)"),
    ("budget-absurd", "capture: {budget_mb: 18549412297}\n", [],
     r"capture.budget_mb: 18549412297 is not allowed; expected an integer number of MB "
     r"from 1 to 50000, or auto"),
    ("capture-need-absurd",
     "workload: {flow_types: {huge: 1GB}, iterations: 1000, pattern: incast}\n", [],
     r"capture.budget_mb: the captures of run huge_rep1 would need \d+ MB; at most 50000 "
     r"MB per run fit a machine's disk"),
    ("flow-size-absurd", "workload: {flow_types: {huge: 900GB}}\n", [],
     r"workload.flow_types.huge: '900GB' is not allowed; expected a size of at most 1GB"),
    ("timeout-a-century", "workload: {timeout_s: 3.0e+9}\n", [],
     r"workload.timeout_s: 3000000000.0 is not allowed; expected a number > 0 and <= 3600"),
    ("rpc-rate-absurd", "workload: {rpc: {rate_per_s: 100000000}}\n", [],
     r"workload.rpc.rate_per_s: 100000000 is not allowed; expected a number >= 0 and <= "
     r"10000"),
    ("seed-negative", "seed: -5\n", [],
     r"seed: -5 is not allowed; expected an integer >= 0 and <= 4294967295"),
    ("bandwidth-level-absurd", "factors: {bw: {huge: {topology.links.core.bw_mbps: 1.0e+12}}}\n",
     [], r"factors.bw.huge: topology.links.core.bw_mbps: 1000000000000.0 is not allowed; "
     r"expected a number > 0 and <= 100000"),
    ("plan-too-large",
     "repetitions: 1000\nfactors: {f: {a: {}, b: {}, c: {}}}\n", [],
     r"repetitions: 1000 x 3 flow type\(s\) x 3 factor level\(s\) make 9000 runs; a plan "
     r"has at most 1000"),
    ("too-many-levels",
     "factors: {f: {" + ", ".join(f"l{i}: {{}}" for i in range(60)) + "}}\n", [],
     r"factors.f: 60 entries; at most 50"),
    ("too-many-events",
     "events: [" + ", ".join(["{at_s: 1, link: a1-c1, action: down}"] * 1001) + "]\n", [],
     r"events: 1001 items; at most 1000"),
    ("shard-billion", MINIMAL, ["--shard", "0/1000000000"],
     r"--shard 0/1000000000: N \(the number of shards\) must be at most 1000"),
    ("shard-zero", MINIMAL, ["--shard", "0/0"],
     r"--shard 0/0: N \(the number of shards\) must be at least 1"),
    ("shard-beyond-plan", MINIMAL, ["--shard", "0/500"],
     r"--shard 0/500: N must be at most 3, the runs of the plan"),
    ("shard-digits", MINIMAL, ["--shard", "0/" + "9" * 5000],
     r"--shard '0/9999.*': expected I/N with integers 0 <= I < N"),
    # ---- run-id collisions ------------------------------------------------------------
    ("run-id-collision",
     "workload: {flow_types: {q: 1KB, q_a: 1KB}}\n"
     "factors: {f: {a_b: {}, b: {}}}\n", [],
     r"factors: the runs of \(flow_type=q, f=a_b\) and \(flow_type=q_a, f=b\) would both "
     r"have the run id q_a_b_rep<N>"),
    ("run-id-collision-two-factors",
     "factors: {f: {x_y: {}, x: {}}, g: {z: {}, y_z: {}}}\n", [],
     r"would both have the run id query_x_y_z_rep<N>"),
    # ---- names that become folders and Slurm job names --------------------------------
    ("name-traversal", "name: ../../../../etc/x\n", [],
     r"name: '../../../../etc/x' is not allowed; expected a plain name of 1-64 letters"),
    ("name-absolute", "name: /etc/cron.d/x\n", [],
     r"name: '/etc/cron.d/x' is not allowed; expected a plain name"),
    ("name-newline", 'name: "x\\nrm -rf /"\n', [],
     r"name: 'x\\nrm -rf /' is not allowed; expected a plain name"),
    ("name-too-long", f"name: {LONG_NAME}\n", [],
     r"name: 'xxxx.*\.\.\. is not allowed; expected a plain name of 1-64"),
    ("name-dots", "name: ..\n", [], r"name: '..' is not allowed; expected a plain name"),
    ("name-from-file-name", "seed: 1\n", ["FILE:my config;x.yaml"],
     r"name: the config sets none, and its file name 'my config;x' is not a plain name"),
    ("name-shell", "name: 'x;$(id)'\n", [],
     r"name: 'x;\$\(id\)' is not allowed; expected a plain name"),
    ("level-name-path", "factors: {f: {../x: {}}}\n", [],
     r"factors.f.../x: the name '../x' is not allowed; use letters, digits"),
    ("level-name-long", "factors: {f: {" + "l" * 80 + ": {}}}\n", [],
     r"factors.f.l+: the name 'l+\.\.\. is not allowed; use letters, digits, '_', '-'"),
    ("flow-type-slash", "workload: {flow_types: {a/b: 1KB}}\n", [],
     r"workload.flow_types.a/b: the name 'a/b' is not allowed"),
    # ---- files a config names ---------------------------------------------------------
    ("sizes-missing", "workload: {pattern: poisson, sizes: nothere.cdf}\n", [],
     r"workload.sizes: cannot read {dir}/nothere.cdf: No such file or directory"),
    ("sizes-symlink-to-secret", "workload: {pattern: poisson, sizes: secret.txt}\n", [],
     r"workload.sizes: {dir}/secret.txt: {dir}/secret.txt is a symbolic link; a file a "
     r"config names is read only through real folders"),
    ("sizes-symlink-to-zero", "workload: {pattern: poisson, sizes: zero.cdf}\n", [],
     r"workload.sizes: {dir}/zero.cdf: {dir}/zero.cdf is a symbolic link"),
    ("sizes-through-linked-folder", "workload: {pattern: poisson, sizes: linked/ok.cdf}\n", [],
     r"workload.sizes: {dir}/linked/ok.cdf: {dir}/linked is a symbolic link"),
    ("sizes-device", "workload: {pattern: poisson, sizes: /dev/zero.cdf}\n", [],
     r"workload.sizes: cannot read /dev/zero.cdf: No such file or directory"),
    ("sizes-folder", "workload: {pattern: poisson, sizes: folder.cdf}\n", [],
     r"workload.sizes: {dir}/folder.cdf is not a regular file"),
    ("sizes-too-big", "workload: {pattern: poisson, sizes: big.cdf}\n", [],
     r"workload.sizes: {dir}/big.cdf has 2000004 bytes; a file a config names is at most "
     r"1000 kB"),
    ("sizes-bad-line-not-echoed", "workload: {pattern: poisson, sizes: private.cdf}\n", [],
     r"workload.sizes: {dir}/private.cdf:1: expected '<bytes> <probability>' "
     r"\(two numbers\)$"),
    ("sizes-decreasing-not-echoed", "workload: {pattern: poisson, sizes: falling.cdf}\n", [],
     r"workload.sizes: {dir}/falling.cdf:3: sizes and probabilities must not decrease "
     r"\(this line is below line 2\)$"),
    ("sizes-fifo", "workload: {pattern: poisson, sizes: fifo.cdf}\n", [],
     r"workload.sizes: {dir}/fifo.cdf is not a regular file"),
    # ---- names with a trailing newline (re.match's $ matches before one) -------------
    ("name-trailing-newline", 'name: "x\\n"\n', [],
     r"name: 'x\\n' is not allowed; expected a plain name"),
    ("level-trailing-newline", 'factors: {f: {"a\\n": {}, b: {}}}\n', [],
     r"factors.f.'a\\n': the name 'a\\n' is not allowed"),
    ("flow-type-trailing-newline", 'workload: {flow_types: {"q\\n": 1KB}}\n', [],
     r"workload.flow_types.'q\\n': the name 'q\\n' is not allowed"),
    # ---- products of bounds: each key within its bound, what a run enumerates not ----
    ("transfers-product", "topology: {k: 8}\n"
     "workload: {pattern: permutation, iterations: 1000, requests: 100}\n", [],
     r"workload.iterations: 1000 x workload.requests: 100 x 128 transfers of the "
     r"permutation pattern on 128 hosts make 12800000 transfers per run; a run has at most "
     r"100000"),
    ("rounds-product", "topology: {k: 8}\n"
     "workload: {pattern: silent, iterations: 1000, requests: 100}\n", [],
     r"workload.iterations: 1000 x workload.requests: 100 x 128 transfers of the silent "
     r"pattern"),
    ("arrivals-product", "topology: {k: 8, links: {host: {bw_mbps: 100000}}}\n"
     "workload: {pattern: poisson, sizes: tiny.cdf, duration_s: 3600, load: 1}\n", [],
     r"workload.duration_s: 3600 s at workload.load 1 of 100000 Mbit/s on 128 hosts makes "
     r"about 3.84e\+15 arrivals per run with workload.sizes 'tiny.cdf'; a run has at most "
     r"90000 expected"),
    ("plan-transfers-product", "repetitions: 1000\ntopology: {k: 8}\n"
     "workload: {pattern: permutation, iterations: 700, flow_types: {q: 1KB}}\n", [],
     r"repetitions: 1000 x 1 cell\(s\) make 8.96e\+07 transfers in all; a plan has at most "
     r"500000"),
    ("level-transfers-product", "factors: {size: {small: {}, "
     "huge: {topology.k: 8, workload.iterations: 1000, workload.requests: 100}}}\n", [],
     r"factors.size.huge: workload.iterations: 1000 x workload.requests: 100 x 128 "
     r"transfers of the silent pattern on 128 hosts"),
    # ---- designs the analysis cannot carry, refused at check --------------------------
    ("design-duplicate-ivs", "factors: {f: {a: {}, b: {}}}\nanalysis: {ivs: [f, f]}\n", [],
     r"analysis.ivs: 'f' given twice; name each column once"),
    ("design-duplicate-clusters", "analysis: {clusters: [flow_type, flow_type]}\n", [],
     r"analysis.clusters: 'flow_type' given twice; name each column once"),
    ("design-empty-dvs", "analysis: {dvs: []}\n", [],
     r"analysis.dvs: \[\] is empty; name at least one metric column"),
    ("design-paths-noisy", "topology: {kind: paths, paths: [{bw_mbps: 100, delay_ms: 25}, "
     "{bw_mbps: 100, delay_ms: 25}]}\nhosts: {kernel: lab}\nworkload: {pattern: noisy}\n", [],
     r"workload.pattern: 'noisy' cannot be drawn on the 2 hosts of this paths topology: it "
     r"splits the hosts into two halves"),
]

# files beside the config: name -> content, or ("link", target), or ("dir",)
FILES: dict[str, object] = {
    "secret.txt": ("link", "private.cdf"),
    "zero.cdf": ("link", "/dev/zero"),
    "folder.cdf": ("dir",),
    "big.cdf": "1 0.5\n" * 333_334,
    "private.cdf": "root:$6$SECRETHASH:19000:0:99999:7:::\n",
    "real/ok.cdf": "1000 0\n2000 1\n",
    "linked": ("link", "real"),
    "falling.cdf": "# sizes\n987654 0.1\n123457 0.2\n",  # neither number may be shown
    "fifo.cdf": ("fifo",),
    "tiny.cdf": "1 0\n2 1\n",
}
SECRET = "SECRETHASH"  # must never appear in any message
