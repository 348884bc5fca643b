//! `lab compare`: peer comparisons in one run, interleaved: our `serve` profiles against the
//! servers a user would pick instead (the lab's plain one-socket echo, `sockperf sr`), and
//! our `load` against `sockperf ping-pong` as a generator, at the same rate; each server is
//! judged on its cost against the plain echo under the same generator.

use crate::cmd;
use crate::report::Page;
use crate::server::ServerKind;
use crate::stats::Summary;
use crate::studies::echo::report::{self, Ratio, Row};
use crate::studies::echo::{Cell, Defaults, Echo, EchoOptions, Generator, Measured, Trial};
use crate::study::{Lab, Outcome, Placement, Plan, Ran, Skipped, Study};
use crate::{LabError, LabResult};

/// Servers `compare` knows: our profiles, the baseline and sockperf.
pub const SERVERS: &[&str] = &[
    "naive",
    "reuseport",
    "steered",
    "tuned",
    "latency",
    "uring",
    "plain",
    "sockperf",
];
/// Generators `compare` knows.
pub const GENERATORS: &[&str] = &["firehose", "sockperf"];

fn describe(server: &str) -> &'static str {
    match server {
        "naive" => "firehose serve --profile naive: one shared socket, N threads",
        "reuseport" => "firehose serve --profile reuseport: SO_REUSEPORT socket per worker",
        "steered" => "firehose serve --profile steered: reuseport + CPU steering + pinning",
        "tuned" => "firehose serve --profile tuned: steered + batches of 64 + PMTUDISC_OMIT",
        "latency" => "firehose serve --profile latency: steered + busy polling + small batches",
        "uring" => "firehose serve --io uring --profile tuned: the tuned sockets read by a multishot io_uring RECVMSG, replies by batched sends",
        "plain" => "the lab's plain echo: one socket, N threads, recvfrom/sendto (the NTT talk's baseline; answers sockperf framing too)",
        _ => "sockperf sr (sockperf's server)",
    }
}

fn server_kind(server: &str, workers: usize) -> ServerKind {
    match server {
        "plain" => ServerKind::PlainEcho { threads: workers },
        "sockperf" => ServerKind::Sockperf,
        "uring" => ServerKind::Firehose {
            flags: ["--io", "uring", "--profile", "tuned", "--workers"]
                .iter()
                .map(|f| f.to_string())
                .chain([workers.to_string()])
                .collect(),
        },
        profile => ServerKind::Firehose {
            flags: vec![
                "--profile".into(),
                profile.into(),
                "--workers".into(),
                workers.to_string(),
            ],
        },
    }
}

fn parse_list<'a>(list: &'a str, valid: &[&str], what: &str) -> LabResult<Vec<&'a str>> {
    let mut out: Vec<&str> = Vec::new();
    for name in list.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        if !valid.contains(&name) {
            return Err(LabError::Usage(format!(
                "unknown {what} '{name}' (valid: {})",
                valid.join(", ")
            )));
        }
        if !out.contains(&name) {
            out.push(name);
        }
    }
    if out.is_empty() {
        return Err(LabError::Usage(format!(
            "no {what} given (valid: {})",
            valid.join(", ")
        )));
    }
    Ok(out)
}

/// The cells of a comparison: every server under every generator that can drive it. A
/// cell whose peer is not installed, or that cannot work, is skipped with the reason.
pub fn plan(
    servers: &str,
    generators: &str,
    workers: usize,
    sockperf_installed: bool,
) -> LabResult<(Vec<Cell>, Vec<Skipped>)> {
    let servers = parse_list(servers, SERVERS, "server")?;
    let generators = parse_list(generators, GENERATORS, "generator")?;
    let mut cells = Vec::new();
    let mut skipped = Vec::new();
    for g in &generators {
        for s in &servers {
            let name = format!("{s}/{g}");
            let needs_sockperf = *s == "sockperf" || *g == "sockperf";
            if needs_sockperf && !sockperf_installed {
                skipped.push(Skipped {
                    name,
                    reason: format!(
                        "sockperf is not installed ({})",
                        cmd::install_hint("sockperf")
                    ),
                });
                continue;
            }
            if *g == "sockperf" && !matches!(*s, "plain" | "sockperf") {
                skipped.push(Skipped {
                    name,
                    reason: "sockperf's client accepts only replies with its client flag \
                             cleared, and firehose serve --proto echo returns the bytes \
                             unchanged; the generators are compared on the plain echo"
                        .into(),
                });
                continue;
            }
            if *s == "sockperf" && *g == "firehose" {
                skipped.push(Skipped {
                    name,
                    reason: "sockperf sr answers only sockperf-framed requests (it logs 'Message \
                             received was larger than expected' for ours); it is measured with \
                             sockperf's own client"
                        .into(),
                });
                continue;
            }
            cells.push(Cell {
                name: name.clone(),
                describe: format!(
                    "{}; load from {}",
                    describe(s),
                    if *g == "firehose" {
                        "firehose load (blocking: waits in epoll_wait, no --spin)"
                    } else {
                        "sockperf ping-pong (blocking: waits in recvfrom, no --nonblocked)"
                    }
                ),
                server: server_kind(s, workers),
                generator: if *g == "firehose" {
                    Generator::Firehose
                } else {
                    Generator::Sockperf
                },
                knobs: None,
            });
        }
    }
    Ok((cells, skipped))
}

/// Picks one figure of a row.
type Metric = fn(&Row) -> &Option<Summary>;

/// Pushes `what`: metric(a) / metric(b), when both medians are known and positive.
fn push_ratio(
    out: &mut Vec<Ratio>,
    what: &str,
    a: &Row,
    b: &Row,
    metric: fn(&Row) -> &Option<Summary>,
) {
    if let (Some(x), Some(y)) = (median(metric(a)), median(metric(b))) {
        out.push(Ratio {
            what: what.into(),
            a: a.name.clone(),
            b: b.name.clone(),
            value: x / y,
        });
    }
}

fn median(s: &Option<Summary>) -> Option<f64> {
    s.map(|s| s.median).filter(|m| *m > 0.0)
}

/// The ratios worth printing: per generator, each server's tps and server CPU per
/// transaction against the baseline (plain echo when present, else the first server); per
/// server driven by both generators, our load against sockperf's client.
pub fn ratios(rows: &[Row]) -> Vec<Ratio> {
    let server_of = |r: &Row| r.name.split('/').next().unwrap_or("").to_string();
    let mut out = Vec::new();
    for g in [Generator::Firehose, Generator::Sockperf] {
        let mine: Vec<&Row> = rows.iter().filter(|r| r.generator == g).collect();
        let Some(base) = mine
            .iter()
            .find(|r| server_of(r) == "plain")
            .or(mine.first())
        else {
            continue;
        };
        for r in mine.iter().filter(|r| r.name != base.name) {
            push_ratio(&mut out, "tps", r, base, |r| &r.tps);
            push_ratio(&mut out, "server CPU us/txn", r, base, |r| {
                &r.server_cpu_us_per_txn
            });
        }
    }
    // sockperf sr can only be driven by its own client; server CPU per transaction is still
    // comparable across generators at the same rate.
    if let Some(sp) = rows.iter().find(|r| r.name == "sockperf/sockperf") {
        for r in rows.iter().filter(|r| r.generator == Generator::Firehose) {
            let what = "server CPU us/txn (each under its own generator)";
            push_ratio(&mut out, what, r, sp, |r| &r.server_cpu_us_per_txn);
        }
    }
    // The generators as a like-for-like pair: on the same server, both waiting in the kernel.
    for ours in rows.iter().filter(|r| r.generator == Generator::Firehose) {
        let theirs = rows
            .iter()
            .find(|r| r.generator == Generator::Sockperf && server_of(r) == server_of(ours));
        let Some(theirs) = theirs else { continue };
        let metrics: [(&str, Metric); 4] = [
            ("generator client CPU us/txn", |r| &r.client_cpu_us_per_txn),
            ("generator p50 us", |r| &r.p50_us),
            ("generator p99 us", |r| &r.p99_us),
            ("generator tps", |r| &r.tps),
        ];
        for (what, metric) in metrics {
            push_ratio(&mut out, what, ours, theirs, metric);
        }
    }
    out
}

/// A comparison run.
pub struct Compare {
    pub echo: Echo,
    servers: String,
    generators: String,
}

impl Compare {
    /// The servers and generators (comma lists of [`SERVERS`] and [`GENERATORS`]; `None`
    /// takes the defaults), checked before anything is built.
    pub fn new(
        o: &EchoOptions,
        placement: &Placement,
        servers: Option<&str>,
        generators: Option<&str>,
    ) -> LabResult<Compare> {
        let servers = servers.unwrap_or("naive,tuned,plain,sockperf").to_string();
        let generators = generators.unwrap_or("firehose,sockperf").to_string();
        // Names are checked before anything is built.
        plan(&servers, &generators, 1, true)?;
        let pins = servers
            .split(',')
            .any(|x| matches!(x.trim(), "steered" | "tuned" | "latency"))
            .then_some("the steered, tuned and latency profiles pin");
        let defaults = Defaults {
            flows: 1,
            window: None,
            rate: Some(10_000),
            pins,
        };
        Ok(Compare {
            echo: Echo::new(o, defaults, placement)?,
            servers,
            generators,
        })
    }
}

impl Study for Compare {
    type Cell = Cell;
    type Measured = Measured;
    type Trial = Trial;
    type Row = Row;

    fn name(&self) -> String {
        "compare".into()
    }

    fn plan(&mut self, lab: &mut Lab<'_>) -> LabResult<Plan<Cell>> {
        let sockperf = cmd::installed("sockperf");
        let (cells, skipped) = plan(&self.servers, &self.generators, self.echo.workers, sockperf)?;
        if cells.is_empty() {
            return Plan::compare(cells, skipped, Vec::new());
        }
        self.echo.build(lab)?;
        let mut notes = vec![
            "sockperf ping-pong sends at --mps (= --rate) and keeps one request in flight; firehose load runs open loop at the same rate".to_string(),
            "the generators are compared as a blocking pair: firehose load waits in epoll_wait and sockperf ping-pong in recvfrom (neither spins); the spinning pair is measured by firehose bench".to_string(),
        ];
        if !cmd::installed("perf") {
            notes.push(format!(
                "peer servers' syscalls/txn are unknown without perf ({})",
                cmd::install_hint("perf")
            ));
        }
        Ok(Plan {
            cells,
            skipped,
            notes,
        })
    }

    fn cell_name(&self, c: &Cell) -> String {
        c.name.clone()
    }

    fn trial(&mut self, lab: &mut Lab<'_>, c: &Cell, rep: usize) -> LabResult<Outcome<Measured>> {
        self.echo.trial(lab, c, rep)
    }

    fn metrics(&self, _c: &Cell, m: Measured) -> Trial {
        self.echo.metrics(m)
    }

    /// Open loop: every server reaches the rate, so each is judged on its cost against
    /// the plain echo (or the first server) under the same generator.
    fn loss<'t>(&self, t: &'t Trial) -> Option<&'t crate::loss::LossAttribution> {
        t.loss.as_ref()
    }

    fn rows(&self, ran: &Ran<Cell, Trial>) -> Vec<Row> {
        let mut rows = report::rows(&ran.cells);
        for g in [Generator::Firehose, Generator::Sockperf] {
            let base = rows
                .iter()
                .find(|r| r.generator == g && r.name.starts_with("plain/"))
                .or_else(|| rows.iter().find(|r| r.generator == g))
                .cloned();
            if let Some(base) = base {
                for r in rows
                    .iter_mut()
                    .filter(|r| r.generator == g && r.name != base.name)
                {
                    r.compare_cost_with(&base);
                }
            }
        }
        rows
    }

    fn page(&self, ran: &Ran<Cell, Trial>, rows: &[Row]) -> Page {
        report::page("compare", &self.echo, ran, rows, &ratios(rows))
    }

    fn extra(
        &self,
        _ran: &Ran<Cell, Trial>,
        rows: &[Row],
    ) -> serde_json::Map<String, serde_json::Value> {
        let mut m = self.echo.extra();
        m.insert("ratios".into(), serde_json::json!(ratios(rows)));
        m
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plan_skips_what_cannot_run() {
        let (cells, skipped) = plan("tuned,plain,sockperf", "firehose,sockperf", 2, true).unwrap();
        let names: Vec<&str> = cells.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "tuned/firehose",
                "plain/firehose",
                "plain/sockperf",
                "sockperf/sockperf"
            ]
        );
        let skipped: Vec<&str> = skipped.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(skipped, ["sockperf/firehose", "tuned/sockperf"]);
        assert_eq!(
            cells[0].server,
            ServerKind::Firehose {
                flags: ["--profile", "tuned", "--workers", "2"]
                    .map(String::from)
                    .to_vec()
            }
        );
        assert_eq!(cells[1].server, ServerKind::PlainEcho { threads: 2 });
    }

    #[test]
    fn missing_peer_is_skipped_with_an_install_hint() {
        let (cells, skipped) = plan("plain,sockperf", "firehose,sockperf", 1, false).unwrap();
        assert_eq!(cells.len(), 1);
        assert_eq!(skipped.len(), 3);
        assert!(skipped
            .iter()
            .all(|s| s.reason.contains("apt-get install -y sockperf")));
    }

    #[test]
    fn unknown_names_list_the_valid_ones() {
        let e = plan("tuned,nginx", "firehose", 1, true)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("unknown server 'nginx'") && e.contains("sockperf"),
            "{e}"
        );
        let e = plan("tuned", "iperf", 1, true).unwrap_err().to_string();
        assert!(e.contains("unknown generator 'iperf'"), "{e}");
    }

    #[test]
    fn ratios_against_the_baseline_and_between_generators() {
        use crate::studies::echo::report::tests::{cell, trial};
        let mk = |name: &str, g: Generator, tps: f64| {
            let mut c = cell(name);
            c.generator = g;
            let mut t = trial(name, 0, tps, false);
            t.generator = g;
            Row::from_trials(&c, &[t])
        };
        let rows = vec![
            mk("tuned/firehose", Generator::Firehose, 200_000.0),
            mk("plain/firehose", Generator::Firehose, 100_000.0),
            mk("plain/sockperf", Generator::Sockperf, 50_000.0),
            mk("sockperf/sockperf", Generator::Sockperf, 80_000.0),
        ];
        let r = ratios(&rows);
        let find = |what: &str, a: &str, b: &str| {
            r.iter()
                .find(|x| x.what == what && x.a == a && x.b == b)
                .map(|x| x.value)
                .unwrap_or_else(|| panic!("no {what} {a}/{b} in {r:?}"))
        };
        // The plain echo is the baseline under each generator, wherever it sits in the list.
        assert!((find("tps", "tuned/firehose", "plain/firehose") - 2.0).abs() < 1e-9);
        assert!((find("tps", "sockperf/sockperf", "plain/sockperf") - 1.6).abs() < 1e-9);
        // The synthetic trials cost 1e6/tps us of server CPU per transaction.
        let cost = find("server CPU us/txn", "tuned/firehose", "plain/firehose");
        assert!((cost - 0.5).abs() < 1e-9);
        // Generators compared on the same server.
        assert!((find("generator tps", "plain/firehose", "plain/sockperf") - 2.0).abs() < 1e-9);
        let cli = find(
            "generator client CPU us/txn",
            "plain/firehose",
            "plain/sockperf",
        );
        assert!((cli - 0.5).abs() < 1e-9);
        find(
            "server CPU us/txn (each under its own generator)",
            "tuned/firehose",
            "sockperf/sockperf",
        );
        assert!(!r.iter().any(|x| x.a == x.b), "no row against itself");
    }
}
