//! The study's results: one row per cell (medians with min-max over the repetitions), the
//! targets of `make bench-sink` stated as met / not met / not measured with the figures, the
//! receiving CPU's kernel profile per mode, as a text table, Markdown and HTML with charts.

use super::{study_name, Cell, Measured, Outcome, Study, Subject};
use crate::env::Environment;
use crate::peers::perf::Symbol;
use crate::report::html::{esc, html_table, page_start, PAGE_END};
use crate::report::markdown::md_table;
use crate::report::{charts, num, range, si, write_pages};
use crate::stats::Summary;
use crate::LabResult;
use serde::Serialize;
use std::fmt::Write as _;
use std::path::Path;

/// One cell over its repetitions.
#[derive(Debug, Clone, Serialize)]
pub struct Row {
    pub cell: Cell,
    pub name: String,
    pub pps: Option<Summary>,
    /// Packets per second per CPU-second of the measured process (the receiver in lab
    /// sink, the sender in lab flood): 1e6 / its CPU us per packet.
    pub pps_per_cpu: Option<Summary>,
    pub receiver_cpu_us_per_packet: Option<Summary>,
    pub sender_cpu_us_per_packet: Option<Summary>,
    pub host_cpu_us_per_packet: Option<Summary>,
    pub own_drops: Option<Summary>,
    pub kernel_drops: Option<Summary>,
    pub trials: Vec<Measured>,
    /// Why the cell was not measured.
    pub not_measured: Option<String>,
}

impl Row {
    fn new(cell: Cell, trials: Vec<Measured>, not_measured: Option<String>, study: Study) -> Row {
        let sum = |f: &dyn Fn(&Measured) -> Option<f64>| Summary::of(trials.iter().filter_map(f));
        let own = |m: &Measured| match study {
            Study::Sink => m.receiver_cpu_us_per_packet,
            Study::Flood => m.sender_cpu_us_per_packet,
        };
        Row {
            name: cell.name(),
            pps: sum(&|m| Some(m.pps)),
            pps_per_cpu: sum(&|m| own(m).map(|us| 1e6 / us)),
            receiver_cpu_us_per_packet: sum(&|m| m.receiver_cpu_us_per_packet),
            sender_cpu_us_per_packet: sum(&|m| m.sender_cpu_us_per_packet),
            host_cpu_us_per_packet: sum(&|m| m.host_cpu_us_per_packet),
            own_drops: sum(&|m| Some(m.own_drops as f64)),
            kernel_drops: sum(&|m| Some(m.kernel_drops as f64)),
            cell,
            trials,
            not_measured,
        }
    }
}

/// A profile of the receiving CPU during one mode's run.
#[derive(Debug, Clone, Serialize)]
pub struct Profile {
    pub cell: String,
    pub top_kernel_symbols: Vec<Symbol>,
    pub error: Option<String>,
}

/// Everything one `lab sink` or `lab flood` run produced.
#[derive(Debug, Clone, Serialize)]
pub struct SinkStudyReport {
    pub study: Study,
    pub environment: Environment,
    pub load_average: String,
    pub server_cpu: usize,
    pub client_cpus: Vec<usize>,
    pub repetitions: usize,
    pub duration_s: u64,
    pub rows: Vec<Row>,
    pub targets: Vec<String>,
    pub profiles: Vec<Profile>,
    pub notes: Vec<String>,
}

fn med(r: Option<&Row>, f: fn(&Row) -> Option<Summary>) -> Option<f64> {
    r.and_then(f).map(|s| s.median)
}

fn verdict(ratio: f64, want: f64) -> &'static str {
    if ratio >= want {
        "met"
    } else {
        "not met"
    }
}

/// The lab sink targets, per receive queue count: the best firehose mode against recvmsg per
/// receiving CPU (>= 1.5x), and uring against recvmmsg stated as measured.
pub fn sink_targets(rows: &[Row], queues: &[usize]) -> Vec<String> {
    let mut out = Vec::new();
    for &q in queues {
        let find = |mode: &str| {
            rows.iter().find(|r| {
                r.cell.queues == q
                    && r.cell.subject == Subject::Sink(mode.into())
                    && r.pps.is_some()
            })
        };
        let best = rows
            .iter()
            .filter(|r| r.cell.queues == q && matches!(r.cell.subject, Subject::Sink(_)))
            .filter_map(|r| Some((r, r.pps_per_cpu?.median)))
            .max_by(|a, b| a.1.total_cmp(&b.1));
        match (med(find("recvmsg"), |r| r.pps_per_cpu), best) {
            (Some(base), Some((b, v))) if base > 0.0 => {
                let ratio = v / base;
                // Work a mode moves into softirq (AF_PACKET's ring copy) leaves the receiving
                // CPU's figure: the host's CPU per packet says what it cost in all.
                let host = match (
                    med(Some(b), |r| r.host_cpu_us_per_packet),
                    med(find("recvmsg"), |r| r.host_cpu_us_per_packet),
                ) {
                    (Some(x), Some(y)) => {
                        format!(" (host CPU per packet {x:.2} against {y:.2} us)")
                    }
                    _ => String::new(),
                };
                out.push(format!(
                    "q{q}: best sink mode per receiving CPU >= 1.5x recvmsg: {}: {} {} pps per CPU \
                     against recvmsg's {} = {ratio:.2}x{host}",
                    verdict(ratio, 1.5),
                    b.cell.subject.name(),
                    si(v),
                    si(base),
                ));
            }
            _ => out.push(format!(
                "q{q}: best sink mode per receiving CPU >= 1.5x recvmsg: not measured (recvmsg or \
                 the receiver's CPU time missing)"
            )),
        }
        let (u, m) = (find("uring"), find("recvmmsg"));
        match (med(u, |r| r.pps), med(m, |r| r.pps)) {
            (Some(a), Some(b)) if b > 0.0 => {
                let cpu = match (med(u, |r| r.pps_per_cpu), med(m, |r| r.pps_per_cpu)) {
                    (Some(x), Some(y)) if y > 0.0 => format!(", per receiving CPU {:.2}x", x / y),
                    _ => String::new(),
                };
                let pct = (a / b - 1.0) * 100.0;
                out.push(format!(
                    "q{q}: uring against recvmmsg (published expectation: within a few percent \
                     for small datagrams): {} against {} pps = {:.2}x{cpu}; this host: uring {:.0}% {}",
                    si(a),
                    si(b),
                    a / b,
                    pct.abs(),
                    if pct >= 0.0 { "faster" } else { "slower" }
                ));
            }
            _ => out.push(format!(
                "q{q}: uring against recvmmsg: not measured (a mode did not run)"
            )),
        }
    }
    out
}

/// The lab flood targets at the smallest frame: packet and xdp >= 2x sendto pps per CPU.
/// `available`: the send modes this build has (xdp may not be one of them).
pub fn flood_targets(rows: &[Row], available: &[&str]) -> Vec<String> {
    let Some(frame) = rows.iter().map(|r| r.cell.frame).min() else {
        return Vec::new();
    };
    let find = |mode: &str| {
        rows.iter().find(|r| {
            r.cell.frame == frame
                && r.cell.subject == Subject::Flood(mode.into())
                && r.pps.is_some()
        })
    };
    let base = med(find("sendto"), |r| r.pps_per_cpu);
    ["packet", "xdp"]
        .iter()
        .map(|mode| {
            let head = format!("{frame}B: flood {mode} >= 2x sendto pps per CPU");
            if !available.contains(mode) {
                return format!("{head}: not measured (flood --io {mode} is not in this build)");
            }
            match (med(find(mode), |r| r.pps_per_cpu), base) {
                (Some(v), Some(b)) if b > 0.0 => format!(
                    "{head}: {}: {} against {} pps per CPU = {:.2}x",
                    verdict(v / b, 2.0),
                    si(v),
                    si(b),
                    v / b
                ),
                _ => format!("{head}: not measured ({mode} or sendto did not run)"),
            }
        })
        .collect()
}

impl SinkStudyReport {
    /// Summarises an outcome; `available` are the modes of this build (for the targets).
    #[allow(clippy::too_many_arguments)]
    pub fn build(
        study: Study,
        out: Outcome,
        queues: &[usize],
        available: &[&str],
        server_cpu: usize,
        client_cpus: Vec<usize>,
        repetitions: usize,
        duration_s: u64,
    ) -> SinkStudyReport {
        let rows: Vec<Row> = out
            .cells
            .into_iter()
            .zip(out.trials)
            .zip(out.skipped)
            .map(|((c, t), s)| Row::new(c, t, s, study))
            .collect();
        let targets = match study {
            Study::Sink => sink_targets(&rows, queues),
            Study::Flood => flood_targets(&rows, available),
        };
        let profiles = out
            .profiles
            .into_iter()
            .map(|(cell, p)| match p {
                Ok(top) => Profile {
                    cell,
                    top_kernel_symbols: top,
                    error: None,
                },
                Err(e) => Profile {
                    cell,
                    top_kernel_symbols: Vec::new(),
                    error: Some(e),
                },
            })
            .collect();
        let notes = match study {
            Study::Sink => vec![
                "on veth the receive softirq runs on the sender's CPUs: the receiving CPU's \
                 time is the receive call's; host CPU per packet holds both"
                    .to_string(),
            ],
            Study::Flood => vec![
                "receiver: XDP_DROP on the server veth (iperf3 -u: its own server, the program off)"
                    .to_string(),
            ],
        };
        SinkStudyReport {
            study,
            environment: Environment::capture(),
            load_average: std::fs::read_to_string("/proc/loadavg")
                .unwrap_or_default()
                .trim()
                .to_string(),
            server_cpu,
            client_cpus,
            repetitions,
            duration_s,
            rows,
            targets,
            profiles,
            notes,
        }
    }

    const HEADERS: [&str; 8] = [
        "cell",
        "pps",
        "pps per CPU",
        "recv us/pkt",
        "send us/pkt",
        "host us/pkt",
        "own drops",
        "kernel drops",
    ];

    fn cells(r: &Row) -> Vec<String> {
        if let Some(why) = &r.not_measured {
            return vec![r.name.clone(), why.clone()];
        }
        let us = |v: f64| format!("{v:.3}");
        vec![
            r.name.clone(),
            range(&r.pps, &si),
            range(&r.pps_per_cpu, &si),
            range(&r.receiver_cpu_us_per_packet, &us),
            range(&r.sender_cpu_us_per_packet, &us),
            range(&r.host_cpu_us_per_packet, &us),
            range(&r.own_drops, &num),
            range(&r.kernel_drops, &num),
        ]
    }

    fn preamble(&self) -> Vec<String> {
        let e = &self.environment;
        let mut v = vec![
            format!(
                "lab {}: veth, receiver on CPU {}, sender on CPU {:?}, {} repetition(s) of {} s",
                study_name(self.study),
                self.server_cpu,
                self.client_cpus,
                self.repetitions,
                self.duration_s
            ),
            format!(
                "kernel {}, {} x {}, load average {}",
                e.kernel, e.nproc, e.cpu_model, self.load_average
            ),
        ];
        v.extend(self.notes.iter().cloned());
        v
    }

    /// The text table, the targets and the profiles.
    pub fn render_table(&self) -> String {
        let mut s = String::new();
        for l in self.preamble() {
            let _ = writeln!(s, "{l}");
        }
        let w = [22, 26, 26, 22, 22, 22, 14, 0];
        let line = |c: &[String]| {
            let mut l = String::new();
            for (x, w) in c.iter().zip(w) {
                let _ = write!(l, "{x:<w$} ");
            }
            l.trim_end().to_string()
        };
        let _ = writeln!(s, "{}", line(&Self::HEADERS.map(String::from)));
        for r in &self.rows {
            let _ = writeln!(s, "{}", line(&Self::cells(r)));
        }
        for p in &self.profiles {
            let _ = writeln!(s, "receiving CPU, {}: {}", p.cell, profile_line(p));
        }
        for t in &self.targets {
            let _ = writeln!(s, "target: {t}");
        }
        s
    }

    fn table_rows(&self) -> Vec<Vec<String>> {
        self.rows.iter().map(Self::cells).collect()
    }

    /// report.md.
    pub fn render_markdown(&self) -> String {
        let mut s = format!("# firehose lab {}\n\n", study_name(self.study));
        for l in self.preamble() {
            let _ = writeln!(s, "- {l}");
        }
        s.push('\n');
        s.push_str(&md_table(&Self::HEADERS, &self.table_rows()));
        s.push_str("\n## Targets\n\n");
        for t in &self.targets {
            let _ = writeln!(s, "- {t}");
        }
        if !self.profiles.is_empty() {
            s.push_str("\n## Receiving CPU: top kernel symbols (perf, cpu-clock)\n\n");
            for p in &self.profiles {
                let _ = writeln!(s, "- {}: {}", p.cell, profile_line(p));
            }
        }
        s
    }

    /// report.html: pps and pps per CPU per cell as charts, and the tables.
    pub fn render_html(&self) -> LabResult<String> {
        let measured: Vec<&Row> = self.rows.iter().filter(|r| r.pps.is_some()).collect();
        let names: Vec<String> = measured.iter().map(|r| r.name.clone()).collect();
        let pick =
            |f: fn(&Row) -> Option<Summary>| measured.iter().map(|r| f(r)).collect::<Vec<_>>();
        let pps = charts::summary_hbars(
            &names,
            &pick(|r| r.pps),
            "Packets per second",
            "pps (median, min-max)",
        )?;
        let per_cpu = charts::summary_hbars(
            &names,
            &pick(|r| r.pps_per_cpu),
            "Packets per second per CPU",
            "pps per CPU-second of the measured process",
        )?;
        let mut h = page_start(&format!("firehose lab {}", study_name(self.study)));
        for l in self.preamble() {
            let _ = writeln!(h, "<p>{}</p>", esc(&l));
        }
        let _ = writeln!(
            h,
            "<div class=\"charts\"><div>{pps}</div><div>{per_cpu}</div></div>"
        );
        h.push_str(&html_table(&Self::HEADERS, &self.table_rows()));
        let list = |h: &mut String, title: &str, items: Vec<String>| {
            let _ = writeln!(h, "<h2>{title}</h2>\n<ul>");
            for i in items {
                let _ = writeln!(h, "<li>{}</li>", esc(&i));
            }
            h.push_str("</ul>\n");
        };
        list(&mut h, "Targets", self.targets.clone());
        let prof = self
            .profiles
            .iter()
            .map(|p| format!("{}: {}", p.cell, profile_line(p)));
        list(&mut h, "Receiving CPU: top kernel symbols", prof.collect());
        h.push_str(PAGE_END);
        Ok(h)
    }

    /// Writes report.md and report.html into `dir`.
    pub fn write_dir(&self, dir: &Path) -> LabResult<()> {
        write_pages(dir, &self.render_markdown(), &self.render_html()?)
    }
}

/// `do_syscall_64 12.3%, _raw_spin_lock 8.0%, ...` or why there is no profile.
fn profile_line(p: &Profile) -> String {
    match &p.error {
        Some(e) => format!("no profile: {e}"),
        None => p
            .top_kernel_symbols
            .iter()
            .map(|s| format!("{} {:.1}%", s.symbol, s.percent))
            .collect::<Vec<_>>()
            .join(", "),
    }
}
