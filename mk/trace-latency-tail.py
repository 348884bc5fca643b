#!/usr/bin/env python3
"""Reads the `perf script` text of mk/trace-latency-tail and names what kept requests from
their replies (issue 25): who ran on the server CPU while its worker was runnable, the
interrupts sent to that CPU and from where, where each request was delivered on the client
CPU and how long it waited there, and, for every slow transaction, which of these it met.

    usage: trace-latency-tail.py SCRIPT_TXT SERVER_PID LOAD_PID SERVER_CPU CLIENT_CPU [SLOW_US]

Round trips are paired in order: the n-th request the generator thread handed to loopback
(net:netif_rx on its thread) with the n-th reply the worker handed back (one server socket,
read in arrival order, nothing lost). Both stamps are taken where the kernel takes load's
rtt stamps on loopback (the request's transmit, the reply's receive at netif_rx), so the
pairs' distribution should match load's rtt; the script prints both for the check."""
import bisect
import collections
import re
import sys

path, SRV, LOAD, SCPU, CCPU = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
SLOW = float(sys.argv[6]) if len(sys.argv) > 6 else 100.0
HEAD = re.compile(r'^\s*(.+?)\s+(\d+)/(\d+)\s+\[(\d+)\]\s+([\d.]+):\s+(\S+):\s*(.*)$')
SWITCH = re.compile(r'prev_comm=(.*) prev_pid=(\d+) prev_prio=\d+ prev_state=(\S+) ==> next_comm=(.*) next_pid=(\d+)')
PLUMBING = ('smp_call', 'generic_exec_single', 'on_each_cpu', '__smp_call', 'send_call_function',
            'native_send_call', 'ipi', 'x2apic', 'flush_tlb_mm_range', '__resched_curr', 'resched_curr')

# tid -> "comm (server)" / "(load)" for our own threads; filled from every event's pid/tid.
ours = {}
events = []  # (t, cpu, comm, pid, tid, name, rest, stack)
with open(path, errors='replace') as f:
    cur = None
    for line in f:
        m = HEAD.match(line)
        if m:
            comm, pid, tid, cpu, t, name, rest = m.groups()
            cur = [float(t), int(cpu), comm, int(pid), int(tid), name, rest, []]
            events.append(cur)
        elif cur is not None and line.strip():
            parts = line.split()
            if len(parts) >= 2:
                cur[7].append(parts[1].split('+')[0])
for e in events:
    if e[3] in (SRV, LOAD):
        ours[e[4]] = f'{e[2]} ({"server" if e[3] == SRV else "load"} thread {e[4]})'
events.sort(key=lambda e: e[0])
if not events:
    sys.exit('trace-latency-tail: the trace is empty')
span = events[-1][0] - events[0][0]
WORKER = next((e[4] for e in events if e[3] == SRV and e[2] == 'fh-worker-0'), None)
GEN = next((e[4] for e in events if e[3] == LOAD and e[2] == 'fh-load-0'), None)


def name(comm, tid):
    return ours.get(tid, comm)


# --- the server CPU: who ran while the worker was runnable; its sleeps
off = None
gap_tasks = collections.Counter()   # task -> gaps it appeared in
gap_time = collections.defaultdict(float)  # task -> CPU time it took inside gaps
gap_max = collections.defaultdict(float)
running = {}  # cpu -> (since, task)
gaps = []  # (start, end, tasks)
sleeps = []  # (start, end)
sleep_from = None
ipis = collections.Counter()
irq_in = collections.Counter()
soft = collections.defaultdict(lambda: [0, 0.0])
soft_open = {}
pending = {}
deliveries = []  # (enqueued, delay, context)
req, rep = [], []
for t, cpu, comm, pid, tid, ev, rest, stack in events:
    if ev == 'sched:sched_switch':
        m = SWITCH.match(rest)
        if not m:
            continue
        pc, pp, st, nc, np_ = m.group(1), int(m.group(2)), m.group(3), m.group(4), int(m.group(5))
        if cpu == SCPU:
            if off is not None and cpu in running:
                since, task = running[cpu]
                if task != 'worker':
                    gap_time[task] += t - since
                    gap_max[task] = max(gap_max[task], t - since)
                    off[2].add(task)
            running[cpu] = (t, 'worker' if np_ == WORKER else name(nc, np_))
            if pp == WORKER:
                if st.startswith('R'):
                    off = [t, None, set()]
                else:
                    sleep_from = t
            if np_ == WORKER:
                if off is not None:
                    off[1] = t
                    gaps.append(tuple(off))
                    for k in off[2]:
                        gap_tasks[k] += 1
                    off = None
                if sleep_from is not None:
                    sleeps.append((sleep_from, t))
                    sleep_from = None
    elif ev in ('ipi:ipi_send_cpu', 'ipi:ipi_send_cpumask') and cpu != SCPU:
        target = re.search(r'cpu(?:mask)?=(\S+)', rest).group(1)
        cpus = set()
        for part in target.split(','):
            a, _, b = part.partition('-')
            if a.isdigit():
                cpus.update(range(int(a), int(b or a) + 1))
        if SCPU in cpus:
            why = next((fn for fn in stack if not fn.startswith(PLUMBING)), None)
            cb = re.search(r'callback=(\S+?)(?:\+|\s|$)', rest)
            ipis[(name(comm, tid), why or re.search(r'callsite=(\S+?)\+', rest).group(1), cb.group(1) if cb else '?')] += 1
    elif ev.startswith('irq_vectors:') and cpu == SCPU:
        irq_in[ev.split(':')[1].replace('_entry', '')] += 1
    elif ev == 'irq:softirq_entry' and cpu == SCPU:
        soft_open[re.search(r'action=(\w+)', rest).group(1)] = (t, name(comm, tid))
    elif ev == 'irq:softirq_exit' and cpu == SCPU:
        v = re.search(r'action=(\w+)', rest).group(1)
        if v in soft_open:
            s, _ = soft_open.pop(v)
            soft[v][0] += 1
            soft[v][1] += t - s
    elif ev == 'net:netif_rx':
        a = re.search(r'skbaddr=(\S+)', rest).group(1)
        if tid == GEN:
            req.append(t)
            pending[a] = t
        elif tid == WORKER:
            rep.append(t)
    elif ev == 'net:netif_receive_skb':
        a = re.search(r'skbaddr=(\S+)', rest).group(1)
        if a in pending:
            s = pending.pop(a)
            ctx = 'in the send of ' + name(comm, tid) if tid == GEN else name(comm, tid)
            deliveries.append((s, t - s, ctx))


def pct(v, p):
    v = sorted(v)
    return v[min(len(v) - 1, int(p / 100 * len(v)))] if v else float('nan')


print(f'trace: {span:.2f} s; server pid {SRV} (worker thread {WORKER}) on CPU {SCPU}, load pid {LOAD} (generator thread {GEN}) on CPU {CCPU}')
print(f'\nthe worker on CPU {SCPU}: preempted {len(gaps)} times ({len(gaps) / span:.0f}/s), runnable but off its CPU {sum(b - a for a, b, _ in gaps) * 1e3:.2f} ms in all ({sum(b - a for a, b, _ in gaps) * 1e6 / span:.0f} us/s), longest {max((b - a for a, b, _ in gaps), default=0) * 1e6:.0f} us; slept {len(sleeps)} times')
print('  what ran in its place (gaps it ran in, CPU time it took there, its longest run there):')
for k, v in sorted(gap_time.items(), key=lambda x: -x[1])[:20]:
    print(f'    {gap_tasks[k]:6d} gaps  {v * 1e3:9.3f} ms  longest {gap_max[k] * 1e6:7.0f} us  {k}')
print(f'\ninterrupts on CPU {SCPU} per second: ' + ', '.join(f'{k} {v / span:.0f}' for k, v in irq_in.most_common()))
print(f'softirqs on CPU {SCPU} (count, time): ' + ', '.join(f'{k} {v[0]} / {v[1] * 1e3:.2f} ms' for k, v in sorted(soft.items(), key=lambda x: -x[1][1])))
print(f'IPIs sent to CPU {SCPU} from other CPUs, by sender and the kernel function that sent it:')
for (who, why, cb), n in ipis.most_common(12):
    print(f'  {n:7d} ({n / span:6.0f}/s)  {who}: {why} -> {cb}')
d = [x[1] * 1e6 for x in deliveries]
ctx = collections.Counter(x[2] for x in deliveries)
print(f'\nrequests delivered on CPU {CCPU} (netif_rx -> netif_receive_skb): {len(d)}, wait p50 {pct(d, 50):.1f} p99 {pct(d, 99):.1f} p99.9 {pct(d, 99.9):.1f} max {max(d, default=0):.0f} us; delivered by: ' + ', '.join(f'{k} {v}' for k, v in ctx.most_common(4)))
n = min(len(req), len(rep))
rtt = [(rep[i] - req[i]) * 1e6 for i in range(n)]
print(f'\nround trips paired: {n} ({len(req)} requests, {len(rep)} replies); rtt p50 {pct(rtt, 50):.1f} p90 {pct(rtt, 90):.1f} p99 {pct(rtt, 99):.1f} p99.9 {pct(rtt, 99.9):.1f} max {max(rtt, default=0):.0f} us')
starts = [g[0] for g in gaps]
sstarts = [s[0] for s in sleeps]
dl = {x[0]: x for x in deliveries}


def overlapping(ivs, st, a, b):
    out, i = [], bisect.bisect_right(st, b) - 1
    while i >= 0 and len(out) < 8:
        if ivs[i][1] is not None and ivs[i][1] >= a:
            out.append(ivs[i])
        elif ivs[i][1] is not None and ivs[i][1] < a - 0.05:
            break
        i -= 1
    return out


why = collections.Counter()
slow = [i for i in range(n) if rtt[i] > SLOW]
for i in slow:
    a, b = req[i], rep[i]
    r = []
    x = dl.get(a)
    if x and x[1] * 1e6 > SLOW / 2:
        r.append(f'request waited on CPU {CCPU} ({x[2]})')
    g = overlapping(gaps, starts, a, b)
    if g:
        r.append('worker preempted by ' + ', '.join(sorted({k for x in g for k in x[2]})))
    if overlapping(sleeps, sstarts, a, b):
        r.append('worker asleep')
    why['; '.join(r) or 'none of these (not in the traced events)'] += 1
print(f'{len(slow)} round trips over {SLOW:.0f} us ({100 * len(slow) / max(n, 1):.3f}%), by what they met:')
for k, v in why.most_common(15):
    print(f'  {v:7d}  {k}')
