# firehose lab targets, included by the top-level Makefile (`include mk/lab.mk`).
# Uses the top-level `build` target and the release binary it produces.

LAB_BIN ?= $(or $(CARGO_TARGET_DIR),target)/release/firehose
LAB_OUT ?= results
# Three interleaved repetitions of 5 s per step, as the rules of measurement ask.
LAB_ARGS ?= --repetitions 3 --duration 5 --warmup 1

.PHONY: ladder peers

# The NTT ladder on loopback, then on veth (root: namespaces), each with a report:
# $(LAB_OUT)/ladder-<topology>/report.html, report.md and results.json.
ladder: build
	@sh mk/deps lab
	mkdir -p $(LAB_OUT)
	$(LAB_BIN) lab ladder --topology loopback $(LAB_ARGS) \
		--json-file $(LAB_OUT)/ladder-loopback.json --report $(LAB_OUT)/ladder-loopback
	$(LAB_BIN) lab ladder --topology veth $(LAB_ARGS) \
		--json-file $(LAB_OUT)/ladder-veth.json --report $(LAB_OUT)/ladder-veth

# Installs the peers (sockperf, Knot DNS, NSD, dnsperf, perf) from Debian packages (root;
# otherwise prints the apt-get line). The list is in mk/deps.
peers:
	@sh mk/deps peers

.PHONY: bench-stream

# The Bloomberg talk's bulk TCP matrix (root: namespaces): MTU 1500 and 9000, BIG TCP off
# (base) and on (185000), every firehose stream sender mode and receiver mode, iperf3 and
# iperf3 -Z beside them, 3 interleaved repetitions of 3 s (about 10 minutes). Writes
# $(LAB_OUT)/stream.json and $(LAB_OUT)/stream/report.{md,html}.
STREAM_ARGS ?= --mtus 1500,9000 --cells base,big-tcp-185k --repetitions 3 --duration 3
bench-stream: build
	@sh mk/deps lab
	mkdir -p $(LAB_OUT)
	$(LAB_BIN) lab stream $(STREAM_ARGS) \
		--json-file $(LAB_OUT)/stream.json --report $(LAB_OUT)/stream

.PHONY: bench-zone-load

# DNS servers loading one 50 MB zone (lab zone-load): firehose, Knot DNS and NSD pinned to
# CPU 0, 5 interleaved starts each, time to the first answer, CPU until then, and the memory
# of each server's whole process tree (peak of the summed RSS, sampled every 10 ms; summed PSS
# after settling). The load average is printed before and after. Writes
# $(LAB_OUT)/zone-load.json.
ZONE_LOAD_ARGS ?= --zone-size 50M --servers firehose,knotd,nsd --repetitions 5 --cpus 0
bench-zone-load: build
	@sh mk/deps peers
	mkdir -p $(LAB_OUT)
	@uptime
	$(LAB_BIN) lab zone-load $(ZONE_LOAD_ARGS) --json-file $(LAB_OUT)/zone-load.json
	@uptime
