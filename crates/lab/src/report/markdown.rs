//! The Markdown summary written by `--report DIR`.

use super::table::{self, cells, HEADERS};
use super::LabReport;
use firehose_sys::cpu::CpuSet;

fn esc(s: &str) -> String {
    s.replace('|', "\\|")
}

/// A Markdown table of `rows` under `headers`, `|` in cells escaped.
pub fn md_table(headers: &[&str], rows: &[Vec<String>]) -> String {
    let mut out = format!(
        "| {} |\n|{}\n",
        headers.join(" | "),
        "---|".repeat(headers.len())
    );
    for r in rows {
        let cells: Vec<String> = r.iter().map(|c| esc(c)).collect();
        out.push_str(&format!("| {} |\n", cells.join(" | ")));
    }
    out
}

/// The NTT talk's `sar -u ALL -P ALL` view with NET_RX and softnet beside it, per row.
fn per_cpu(rep: &LabReport) -> String {
    let mut out = format!(
        "\n## Per CPU (median repetition)\n\n| {} |\n|{}\n",
        table::PER_CPU_HEADERS.join(" | "),
        "---|".repeat(table::PER_CPU_HEADERS.len())
    );
    for cells in table::per_cpu_cells(rep) {
        let cells: Vec<String> = cells.iter().map(|c| esc(c)).collect();
        out.push_str(&format!("| {} |\n", cells.join(" | ")));
    }
    out
}

fn on_off(b: bool) -> &'static str {
    if b {
        "on"
    } else {
        "off"
    }
}

/// Renders the report as Markdown.
pub fn render(rep: &LabReport) -> String {
    let mut out = format!("# firehose lab {}\n\n", rep.kind);
    out.push_str(&format!(
        "- topology: {} ({} queue(s))\n- placement: server CPUs {}, client CPUs {}; {} worker(s)\n\
         - load: {} flow(s), window {}, {}, {}-byte payloads, {} s measured after {} s warm-up, {} repetition(s) interleaved\n\
         - host: kernel {}, {}, {} CPUs; iptables modules loaded: {}\n\n",
        rep.topology,
        rep.queues,
        CpuSet::from(&rep.placement.server_cpus),
        CpuSet::from(&rep.placement.client_cpus),
        rep.workers,
        rep.load.flows,
        rep.load.window.map_or("default".into(), |w| w.to_string()),
        rep.load.rate.map_or("closed loop".into(), |r| format!("open loop at {r}/s")),
        rep.load.size,
        rep.load.duration_s,
        rep.load.warmup_s,
        rep.repetitions,
        rep.environment.kernel,
        rep.environment.cpu_model,
        rep.environment.nproc,
        if rep.environment.modules_loaded.is_empty() {
            "none".to_string()
        } else {
            rep.environment.modules_loaded.join(", ")
        },
    ));
    out.push_str(&format!("| {} |\n", HEADERS.join(" | ")));
    out.push_str(&format!("|{}\n", "---|".repeat(HEADERS.len())));
    for r in &rep.rows {
        let c: Vec<String> = cells(r).iter().map(|c| esc(c)).collect();
        out.push_str(&format!("| {} |\n", c.join(" | ")));
    }
    out.push_str("\nWhat each configuration adds:\n\n");
    for r in &rep.rows {
        out.push_str(&format!("- `{}`: {}\n", r.name, r.describe));
    }
    out.push_str(&per_cpu(rep));
    let knobs: Vec<String> = rep
        .rows
        .iter()
        .filter_map(|r| {
            let k = r.knobs.as_ref()?;
            Some(format!(
                "- `{}`: GRO {}/{} (server/client), rps_cpus [{}], server xps_cpus [{}], client xps_cpus [{}], rp_filter {}\n",
                r.name,
                on_off(k.server_gro),
                on_off(k.client_gro),
                k.server_rps_cpus.join(" "),
                k.server_xps_cpus.join(" "),
                k.client_xps_cpus.join(" "),
                k.server_rp_filter
            ))
        })
        .collect();
    if !knobs.is_empty() {
        out.push_str("\n## OS knobs, as read back from the kernel\n\n");
        out.extend(knobs);
    }
    if !rep.ratios.is_empty() {
        out.push_str("\n## Ratios (medians, measured side by side)\n\n");
        for r in &rep.ratios {
            out.push_str(&format!(
                "- {}: {} / {} = **{:.2}**\n",
                r.what, r.a, r.b, r.value
            ));
        }
    }
    if !rep.skipped.is_empty() {
        out.push_str("\n## Skipped\n\n");
        for s in &rep.skipped {
            out.push_str(&format!("- `{}`: {}\n", s.name, s.reason));
        }
    }
    if !rep.notes.is_empty() {
        out.push_str("\n## Notes\n\n");
        for n in &rep.notes {
            out.push_str(&format!("- {n}\n"));
        }
    }
    out.push_str(
        "\nVerdicts judge tps in closed loop and server CPU us/txn in open loop (where every \
         configuration runs at the same rate). A verdict is `helped` or `hurt` only when the medians differ by more than the \
         larger spread of the two rows (at least 5%) and their min-max ranges do not overlap. \
         `[client-bound]` marks rows whose generator CPU was saturated while the server's was \
         not: they say nothing about the server.\n",
    );
    out
}
