# firehose — see README.md. Every target builds what it needs.
CARGO ?= cargo
BIN := target/release/firehose

.PHONY: build demo test bench bench-xdp profile-xdp profile-stamps bench-sink bench-io bench-io-counts bench-drops bench-radius bench-latency bench-latency-tail bench-spin-tail trace-latency-tail bench-latency-curve bench-gencpu bench-wake-budget bench-shaping bench-ntp bench-ntp-interleaved lint clean deps install fuzz attack

# The Debian packages every target uses (one list: mk/deps); installs them as root.
deps:
	@sh mk/deps all

build:
	$(CARGO) build --release --locked

# A short climb of the server profiles on loopback (server on CPU 0, client on CPU 1).
demo: build
	@sh mk/deps demo
	$(BIN) bench --repetitions 1 --duration 2

# The test suite (root-only tests skip with a reason when not root), then the fuzz
# targets' checks on their seeds and on every crash ever found (stable, no libFuzzer).
test:
	@sh mk/deps test
	$(CARGO) test --workspace --locked
	$(CARGO) test --manifest-path fuzz/Cargo.toml --locked --no-default-features --target-dir target

# Every cargo-fuzz target (fuzz/) for FUZZ_SECONDS each, from seeded corpora: nightly, and
# cargo-fuzz (installed when missing). FUZZ_TARGETS="frame zone" runs some; see mk/fuzz for
# FUZZ_SANITIZER and FUZZ_ARGS, and CONTRIBUTING.md (Fuzzing) for adding a target.
FUZZ_SECONDS ?= 60
fuzz:
	FUZZ_SECONDS=$(FUZZ_SECONDS) sh mk/fuzz $(FUZZ_TARGETS)

# Issue 20's attack runs at full size (root; release build): the crafted frames, 1,000,000
# random frames at the AF_XDP port, 1,000,000 mutated DNS queries over UDP and over TCP to
# the AF_XDP and the socket DNS servers, and echo at twice its capacity for 10 s. Every
# server must keep answering, with counters that add up. make test runs the same tests with
# 20,000 of each (crates/cli/tests/integration/attack.rs). ATTACK_SEED replays a run.
ATTACK_N ?= 1000000
ATTACK_SECONDS ?= 10
attack:
	@sh mk/deps test
	@uptime
	FH_ATTACK_N=$(ATTACK_N) FH_ATTACK_SECONDS=$(ATTACK_SECONDS) $(if $(ATTACK_SEED),FH_ATTACK_SEED=$(ATTACK_SEED)) \
		$(CARGO) test --release --locked -p firehose-cli --test integration attack:: -- --nocapture --test-threads 1
	@uptime

# The engine benchmark: 3 interleaved repetitions per cell, medians (min-max).
bench: build
	@sh mk/deps bench
	$(BIN) bench --repetitions 3 --duration 5 --json-file bench.json

# The binary, its man pages and shell completions under $(DESTDIR)$(PREFIX).
PREFIX ?= /usr/local
SHARE = $(DESTDIR)$(PREFIX)/share
install: build
	install -Dm755 $(BIN) $(DESTDIR)$(PREFIX)/bin/firehose
	mkdir -p $(SHARE)/man/man1 $(SHARE)/bash-completion/completions \
		$(SHARE)/zsh/site-functions $(SHARE)/fish/vendor_completions.d
	$(BIN) man --dir $(SHARE)/man/man1
	$(BIN) completions bash > $(SHARE)/bash-completion/completions/firehose
	$(BIN) completions zsh > $(SHARE)/zsh/site-functions/_firehose
	$(BIN) completions fish > $(SHARE)/fish/vendor_completions.d/firehose.fish

# AF_XDP against the kernel socket path on the veth lab (root): server on CPU 0, client on
# CPU 1, 3 interleaved repetitions, medians (min-max). Echo 100 B (max tps, total host CPU
# per transaction, server and client CPU; both generators) and busy-polled ping-pong; then
# DNS: serve --io xdp against Knot DNS in its XDP and socket modes, under load --io xdp and
# dnsperf. The machine's load average is printed with the figures.
XDP_ARGS ?= --topology veth --server-cpus 0 --client-cpus 1 --repetitions 3 --duration 5 --warmup 1
bench-xdp: build
	@sh mk/deps lab
	@uptime
	$(BIN) lab compare --io socket,xdp $(XDP_ARGS) --json-file bench-xdp-echo.json
	$(BIN) lab compare --io socket,xdp --proto dns $(XDP_ARGS) --json-file bench-xdp-dns.json
	@uptime

# Where the AF_XDP server's CPU goes (root): perf record of the server's CPU under load --io
# xdp on the veth lab for echo, DNS and NTP, samples grouped by call chain into ns per
# transaction (delivery into the generator, copy-mode transmit, our own code) and the floor
# without our code; then NTP's offset at saturation by the server's --batch. PROFILE_BINS
# lists binaries to run interleaved (default this build), e.g. a baseline first.
PROFILE_BINS ?= $(BIN)
profile-xdp: build
	@sh mk/deps lab
	sh mk/profile-xdp $(PROFILE_BINS)

# What load --stamps costs per transaction and where (root): serve --profile latency on CPU
# 0, load on CPU 1 at 150k/s with --stamps, --stamps --spin and without stamps; per run the
# generator's system calls per transaction by call (perf stat) and its perf record -g samples
# grouped (send, stamps made, receive, arrival stamps, error queue, sleep, own code) into us
# per transaction (mk/profile-stamps; RATE, DUR, REPS, MODES). PROFILE_BINS as above, e.g.
# PROFILE_BINS="/work/baseline/firehose-x target/release/firehose" (about 10 s a run).
profile-stamps: build
	@sh mk/deps lab
	sh mk/profile-stamps $(PROFILE_BINS)

# The packet-rate study on the veth lab (root), receiver on CPU 0, sender on CPU 1, 3
# interleaved repetitions: lab sink (every receive mode at 1 and 2 receive queues, 64-byte
# frames, udp_sink and sockperf sr beside them where installed, perf profile of the
# receiving CPU), then lab flood (every send mode, trafgen and iperf3 -u, at 64, 512 and
# 1518-byte frames into an XDP_DROP receiver). Each prints its table and its target lines
# (met / not met / not measured, with the figures); the load average is printed too.
SINK_ARGS ?= --server-cpus 0 --client-cpus 1 --repetitions 3 --duration 3 --warmup 1
bench-sink: build
	@sh mk/deps lab
	@uptime
	$(BIN) lab sink --queues 2 --frame 64 $(SINK_ARGS) --json-file bench-sink.json
	$(BIN) lab flood --frames 64,512,1518 $(SINK_ARGS) --json-file bench-flood.json
	@uptime

# Before/after of the I/O drivers (root): this build against BASELINE, a firehose binary
# from before a change, interleaved (before, after, ...) over 3 rounds: load --io socket and
# uring, serve --io uring against the tuned socket path (loopback at 10k/s), serve and load
# --io socket, xdp and uring on veth, lab sink and lab flood socket, io_uring, AF_PACKET and
# AF_XDP modes at 64 B. Medians (min-max) per
# binary, the load average before each run (mk/io-before-after).
BASELINE ?=
bench-io: build
	@sh mk/deps lab
	@test -n "$(BASELINE)" || { echo "make bench-io BASELINE=/path/to/firehose (the binary to compare against)"; exit 2; }
	sh mk/io-before-after $(BASELINE) $(BIN) 3 $(LAB_OUT)/io-before-after

# The same rows counted, not timed (root): what each binary asks of the kernel per packet
# (system calls, io_uring submissions and completions, context switches, page faults, from
# perf stat in the measured process), this build against BASELINE, 3 interleaved rounds on
# loopback; counts hold on a busy host where times do not (mk/io-counts).
bench-io-counts: build
	@sh mk/deps lab
	@test -n "$(BASELINE)" || { echo "make bench-io-counts BASELINE=/path/to/firehose (the binary to compare against)"; exit 2; }
	sh mk/io-counts $(BASELINE) $(BIN) 3 $(LAB_OUT)/io-counts

# What watching costs (root): the sink's pps at max rate without and with firehose drops
# beside it (3 interleaved repetitions, medians and min-max, target >= 95%), then firehose
# top's CPU at a 1 s refresh in a pseudo-terminal (target <= 2% of one CPU). The load
# average is printed before and after.
bench-drops: build
	@sh mk/deps bench
	sh mk/bench-observe.sh

# RADIUS against FreeRADIUS on loopback (mk/bench-radius: lab compare --proto radius twice):
# the same generated clients.conf and users file, servers on CPU 0 (FreeRADIUS's thread pool
# of 1), firehose load --proto radius (PAP, Message-Authenticator) on CPU 1, 3 interleaved
# repetitions: Access-Requests/s and CPU per request at saturation, then p99 at half of
# FreeRADIUS's maximum for both; medians (min-max), ratios, the load average at both ends.
bench-radius: build
	@sh mk/deps lab
	sh mk/bench-radius $(BIN)

# NTP against chronyd on loopback, then (root) against chronyd and ntpsec's ntpd across the
# lab's veth pair (mk/bench-ntp: lab compare --proto ntp four times): all serve the clock
# at stratum 10, no rate limit or client log, servers on CPU 0 (one chronyd instance per
# CPU on a reuseport port; ntpd one process on port 123), firehose load --proto ntp on
# CPU 1, 3 interleaved repetitions: responses/s and CPU per response at saturation, then the
# hold time p99 at half of chronyd's maximum for all; on veth firehose once per I/O path
# (socket, AF_XDP in copy mode, io_uring), a row each; medians (min-max), ratios, the load
# average at both ends.
bench-ntp: build
	@sh mk/deps lab
	sh mk/bench-ntp $(BIN)

# NTP's interleaved mode on loopback (mk/bench-ntp-interleaved): one serve --proto ntp on
# CPU 0, load --proto ntp on CPU 1 at 20k/s and 80k/s, basic requests against
# --ntp-interleaved, 3 interleaved repetitions: the server's and the host's CPU per response,
# offset, delay and hold time p50 from the basic and from the interleaved timestamps.
bench-ntp-interleaved: build
	@sh mk/deps lab
	sh mk/bench-ntp-interleaved $(BIN)

# Where load's latency goes on loopback (mk/bench-latency): rtt p50 under the default pacing
# (and with --no-gso, every send apart) against --spin and send_lag p99 with --spin, at 50k/s
# and 150k/s, from kernel timestamps
# (load --stamps); then the stamps' own cost per transaction. 3 interleaved repetitions,
# medians (min-max), the load average beside every figure. BENCH_BINS lists binaries to run
# interleaved cell by cell (default this build), e.g. a build before a change first.
BENCH_BINS ?= $(BIN)
bench-latency: build
	@sh mk/deps lab
	sh mk/bench-latency $(BENCH_BINS)

# Where the latency profile's rtt tail comes from (mk/bench-latency-tail): loopback, about 10%
# and 50% of its max tps, serve --busy-poll 50 against 1000 us, 3 interleaved repetitions of
# 3 s (~1 min): rtt p50/p90/p99/p99.9 beside the server worker's sleeps, preemptions and
# run-queue delay, the server CPU's interrupts and softirqs, steal and the load average.
bench-latency-tail: build
	@sh mk/deps lab
	sh mk/bench-latency-tail $(BIN)

# The spinning generator's own tail (mk/bench-spin-tail; issue 25's send_lag p99 <= 20 us):
# load --stamps --spin at 50k/s against serve --profile tuned, 5 x 4 s, send_lag and rtt
# p50/p90/p99/p99.9 beside the generator thread's preemptions, run-queue wait, system calls per
# transaction and its CPU's timer ticks (~1 min). SPIN_BINS lists binaries to interleave run
# by run (a build before a change first).
SPIN_BINS ?= $(BIN)
bench-spin-tail: build
	@sh mk/deps lab
	sh mk/bench-spin-tail $(SPIN_BINS)

# What preempts that worker and makes the tail, traced (mk/trace-latency-tail; root): one cell
# (RATE=125000 SPIN=50 by default) under perf record of the scheduler, softirqs, IPIs and
# loopback delivery; prints who ran on the server CPU while the worker was runnable, the IPIs
# sent to it and by what, where requests waited on the client CPU, and what each slow round
# trip met.
trace-latency-tail: build
	@sh mk/deps lab
	sh mk/trace-latency-tail $(BIN)

# The generator's CPU per DNS query at 50k/s against dnsperf's (mk/bench-gencpu; issue 25):
# dnsperf, load's default socket path, --io uring and --io uring --defer-taskrun, each on
# CPU 1 against one serve --proto dns on CPU 0, 3 interleaved repetitions of 5 s: the
# process's CPU per query (as lab compare counts it), system calls per query, latency p50,
# the load average (~1.5 min).
bench-gencpu: build
	@sh mk/deps lab
	sh mk/bench-gencpu $(BIN)

# The default pacing's CPU budget against its smoothness (mk/bench-wake-budget; issue 25): DNS
# (1 flow, dnsperf beside it) and echo (4 flows) at 50k/s and 150k/s with --per-wake
# 1,2,4,8,16,64, the default pacing and --spin: CPU and system calls per request without
# stamps, rtt p50 with --stamps and its ratio to --spin's, 3 interleaved repetitions of 3 s
# (~16 min; PER_WAKE, RATES, PROTOS, REPS and DUR narrow it).
bench-wake-budget: build
	@sh mk/deps lab
	sh mk/bench-wake-budget $(BIN)

# Whether a token bucket (tbf) on the client's veth smooths load's arrivals, the kernel pacer
# this host has without fq or etf (mk/bench-shaping, root): departure gaps, send lag and the
# rate delivered with and without it, at 20k/s and 50k/s, 3 interleaved repetitions (~1 min).
bench-shaping: build
	@sh mk/deps lab
	sh mk/bench-shaping $(BIN)

# Latency against load (firehose lab latency): each server profile's max tps (closed loop, then
# the highest open-loop rate it holds under the curve's own load: at most 8 runs, x0.8 down from
# the closed-loop max then 2 bisections), its unloaded point (1 flow, window 1), then
# p50/p99/p99.9 of latency and kernel-stamped rtt at 10%...100% of the open-loop max, beside
# sockperf sr + sockperf under-load --mps at the same rates (both clients spin; latency with
# sockperf sr --nonblocked), on loopback then on veth (root). Server on CPU 0, both clients on
# CPU 1, 3 interleaved repetitions; tables, results JSON and report.html (the curve) under
# $(LAB_OUT)/latency-<topology>; each summary ends with issue 25's goals (met, not met, or
# client-bound: cannot judge); the load average before and after. About 19 minutes (2 s
# measured per run: at 10% of the max, about 100,000 transactions per run, enough for p99.9;
# 30% and 90% are left out to stay under 20 minutes with the search and the unloaded point:
# no goal needs them).
LATENCY_CURVE_ARGS ?= --repetitions 3 --duration 2 --warmup 1 --server-cpus 0 --client-cpus 1 \
	--percents 10,20,40,50,60,70,80,100
bench-latency-curve: build
	@sh mk/deps lab
	@uptime; date +%T
	mkdir -p $(LAB_OUT)
	$(BIN) lab latency --topology loopback $(LATENCY_CURVE_ARGS) \
		--json-file $(LAB_OUT)/latency-loopback.json --report $(LAB_OUT)/latency-loopback
	$(BIN) lab latency --topology veth $(LATENCY_CURVE_ARGS) \
		--json-file $(LAB_OUT)/latency-veth.json --report $(LAB_OUT)/latency-veth
	@uptime; date +%T

lint:
	$(CARGO) fmt --all -- --check
	$(CARGO) fmt --manifest-path fuzz/Cargo.toml -- --check
	$(CARGO) clippy --workspace --all-targets --locked -- -D warnings
	$(CARGO) clippy --manifest-path fuzz/Cargo.toml --all-targets --locked --no-default-features \
		--target-dir target -- -D warnings

clean:
	$(CARGO) clean

include mk/lab.mk
