//! The plain-text table printed at the end of every run.

use super::{cpu_split, num, range, si, LabReport, Row};

/// Column headers, shared with the Markdown and HTML tables.
pub const HEADERS: [&str; 12] = [
    "config",
    "tps median (min-max)",
    "Mbps",
    "gain",
    "verdict",
    "srv us/txn",
    "cli us/txn",
    "syscalls/txn",
    "p50 us",
    "p99 us",
    "drops/lost",
    "per-CPU usr/sys/soft %",
];

/// Headers of the per-CPU table (the NTT talk's `sar -u ALL -P ALL` with NET_RX and softnet).
pub const PER_CPU_HEADERS: [&str; 12] = [
    "config",
    "CPU",
    "%usr",
    "%sys",
    "%irq",
    "%soft",
    "%idle",
    "NET_RX/s",
    "softnet processed/s",
    "dropped",
    "time_squeeze",
    "received_rps",
];

/// One line per row and CPU, from each row's median repetition.
pub fn per_cpu_cells(rep: &LabReport) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    for r in &rep.rows {
        let per_s = |v: u64| {
            if r.window_s > 0.0 {
                si(v as f64 / r.window_s)
            } else {
                "-".into()
            }
        };
        for c in &r.cpus {
            let sn = r.softnet.iter().find(|x| x.cpu == c.cpu);
            let pct = |v: f64| format!("{v:.1}");
            out.push(vec![
                r.name.clone(),
                c.cpu.to_string(),
                pct(c.split.usr),
                pct(c.split.sys),
                pct(c.split.irq),
                pct(c.split.soft),
                pct(c.split.idle),
                per_s(c.net_rx),
                sn.map_or("-".into(), |x| per_s(x.processed)),
                sn.map_or("-".into(), |x| x.dropped.to_string()),
                sn.map_or("-".into(), |x| x.time_squeeze.to_string()),
                sn.map_or("-".into(), |x| x.received_rps.to_string()),
            ]);
        }
    }
    out
}

/// The cells of one row, as text.
pub fn cells(r: &Row) -> Vec<String> {
    let mut name = r.name.clone();
    if r.client_bound {
        name.push_str(" [client-bound]");
    }
    let sys = match &r.syscalls_per_txn {
        None => "unknown".into(),
        Some(_) => format!(
            "{} ({})",
            range(&r.syscalls_per_txn, &num),
            r.syscalls_source
        ),
    };
    let drops = format!(
        "{}/{}",
        r.kernel_drops
            .map_or("-".into(), |s| format!("{:.0}", s.median)),
        r.lost.map_or("-".into(), |s| format!("{:.0}", s.median))
    );
    vec![
        name,
        range(&r.tps, &si),
        r.mbps.map_or("-".into(), |s| num(s.median)),
        r.gain.map_or("-".into(), |g| format!("x{g:.2}")),
        if r.reverted {
            format!("{}, reverted", r.verdict.name())
        } else {
            r.verdict.name().into()
        },
        range(&r.server_cpu_us_per_txn, &num),
        range(&r.client_cpu_us_per_txn, &num),
        sys,
        range(&r.p50_us, &num),
        range(&r.p99_us, &num),
        drops,
        cpu_split(&r.cpus),
    ]
}

/// Renders rows as an aligned text table.
pub fn render_rows(rows: &[Row]) -> String {
    let body: Vec<Vec<String>> = rows.iter().map(cells).collect();
    let mut widths: Vec<usize> = HEADERS.iter().map(|h| h.len()).collect();
    for r in &body {
        for (w, c) in widths.iter_mut().zip(r) {
            *w = (*w).max(c.chars().count());
        }
    }
    let line = |cols: Vec<String>| {
        cols.iter()
            .zip(&widths)
            .map(|(c, w)| format!("{c:<w$}"))
            .collect::<Vec<_>>()
            .join("  ")
            .trim_end()
            .to_string()
    };
    let mut out = line(HEADERS.iter().map(|h| h.to_string()).collect());
    out.push('\n');
    for r in body {
        out.push_str(&line(r));
        out.push('\n');
    }
    out
}

/// The whole text summary: header lines, the table, ratios, skipped configs and notes.
pub fn render(rep: &LabReport) -> String {
    let mut out = format!(
        "firehose lab {}: topology {} ({} queue(s)), server CPUs {}, client CPUs {}, {} worker(s), {} repetition(s) of {} s\n",
        rep.kind,
        rep.topology,
        rep.queues,
        firehose_sys::cpu::CpuSet::from(&rep.placement.server_cpus),
        firehose_sys::cpu::CpuSet::from(&rep.placement.client_cpus),
        rep.workers,
        rep.repetitions,
        rep.load.duration_s
    );
    out.push_str(&format!(
        "host: {} | {} | {} CPUs\n\n",
        rep.environment.kernel, rep.environment.cpu_model, rep.environment.nproc
    ));
    out.push_str(&render_rows(&rep.rows));
    if !rep.ratios.is_empty() {
        out.push_str("\nratios (medians):\n");
        for r in &rep.ratios {
            out.push_str(&format!(
                "  {}: {} / {} = {:.2}\n",
                r.what, r.a, r.b, r.value
            ));
        }
    }
    for s in &rep.skipped {
        out.push_str(&format!("skipped {}: {}\n", s.name, s.reason));
    }
    for n in &rep.notes {
        out.push_str(&format!("note: {n}\n"));
    }
    out
}
