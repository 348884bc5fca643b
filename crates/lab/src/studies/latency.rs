//! `firehose lab latency`: latency against load, per server profile, beside sockperf's
//! under-load mode at the same rates (issue 25 item 4).
//!
//! A first step measures each profile's max tps: closed loop (4 flows x window 32, one worker
//! on the server CPU, `firehose load` on the client CPU), then the highest open-loop rate it
//! sustains under the curve's own arrivals, searched down from there in a few runs
//! ([`search`]); the percents are of that one. Then, interleaved: the unloaded point (one
//! request outstanding: `load --flows 1 --window 1 --stamps --spin`, the base of the tail
//! goal), and at each fraction of the max (10% ... 100% by default) `serve --profile P`
//! with `firehose load --rate R --stamps`, giving
//! p50/p99/p99.9 of `latency` (from the intended send time) and of `rtt` (kernel departure
//! to kernel arrival), and sockperf's server with its under-load client at the same rate.
//! The pairs are like for like in how they wait. The servers: `tuned` (and every profile
//! but `latency`) sleeps in the kernel and sockperf's server runs blocking; `latency` polls
//! and sockperf's server runs `--nonblocked`. The clients: sockperf's sender busy-waits on
//! the clock between sends in every mode and stamps each send just before its sendto, so our
//! load runs `--spin` in every pair (with the default pacing, a sleep that wakes 5-20 us late
//! and sends a wake-up's requests back to back, that lateness is in our `latency`, which
//! counts from the intended send, and not in sockperf's: session 6's `tuned` rows at 20-30%
//! compared a p50 of which half was the generator's send_lag). Both clients run on the same
//! client CPU, both servers on the same server CPU.
//!
//! Each trial also reads how the server's busy thread was scheduled ([`sched`]: sleeps,
//! preemptions and run-queue delay per second; our worker `fh-worker-0`, sockperf's main
//! thread), so a tail can be told apart from the server being off its CPU.
//!
//! sockperf's under-load client times one reply in [`sockperf::REPLY_EVERY`] and runs with
//! `--full-rtt`, so its figures are round trips from its `sendto` call to its `recvfrom`'s
//! return (it has no kernel stamps, so its `rtt` columns stay empty). Our `latency` with
//! `--stamps` runs from the intended send to the reply's kernel arrival stamp (send_lag +
//! rtt): the reply's wait for our read (recv_lag) is outside it, sockperf's read is inside
//! its figure, and sockperf's own send lateness is outside its figure.
//!
//! sockperf's under-load client is two threads: a sender that always spins between sends
//! (a busy-wait on the clock for its `--mps` pacing) and a receiver. With `--nonblocked`
//! the receiver spins too, and on the one client CPU the two spinners share it in
//! scheduler slices of milliseconds: every reply waits for the receiver's next slice
//! (p50 1.8-2.9 ms in session 5's run). So the polling pair runs `sr --nonblocked` but
//! the client blocking: its sender already polls the clock, its receiver is woken by the
//! reply, like `load --spin`'s one thread that polls both.

use crate::cmd;
use crate::metrics::Latency;
use crate::peers::{firehose, sockperf};
use crate::proc;
use crate::report::page::Page;
use crate::report::thousands;
use crate::sample::port_bound;
use crate::stats::Summary;
use crate::study::{Lab, OffServer, Outcome, Plan, Ran, Skipped, Study};
use crate::topology::{run_id, Kind, Side, Topology};
use crate::{LabError, LabResult};
use firehose_load::LoadReport;
pub use goals::{client_bound, goals, kept_rate, Goal, Verdict};
pub use search::{MaxTps, Next, Step, StepOutcome};
use serde::Serialize;
use std::time::{Duration, Instant};

mod goals;
mod page;
pub mod sched;
pub mod search;

use page::page;

/// What to run.
#[derive(Debug, Clone)]
pub struct LatencyCurve {
    pub profiles: Vec<String>,
    /// Fractions of the max tps, in percent.
    pub percents: Vec<u32>,
    pub duration: Duration,
    pub warmup: Duration,
    pub topology: Kind,
    pub flows: usize,
    pub size: usize,
    /// Each profile's maxima (or why there is none), from [`Study::plan`].
    max_tps: Vec<(String, Result<MaxTps, String>)>,
}

impl LatencyCurve {
    pub fn new(profiles: Vec<String>, percents: Vec<u32>, duration: Duration) -> LatencyCurve {
        LatencyCurve {
            profiles,
            percents,
            duration,
            warmup: Duration::from_secs(1),
            topology: Kind::Loopback,
            flows: 4,
            size: 100,
            max_tps: Vec::new(),
        }
    }
}

/// Our server's busy thread (the engine names its workers `fh-worker-N`).
const WORKER: &str = "fh-worker-0";

/// Who ran a cell: our server and client, or sockperf's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Who {
    Firehose,
    Sockperf,
}

/// One profile's pair at one rate, or its unloaded point.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Cell {
    pub profile: String,
    pub who: Who,
    /// 0 for the unloaded point.
    pub percent: u32,
    /// Requests per second offered; 0 for the unloaded point (closed loop).
    pub rate: f64,
    /// One request outstanding (closed loop, 1 flow, window 1): the base of the tail goal.
    pub unloaded: bool,
}

/// Whether `profile`'s server polls (the `latency` profile) or sleeps in the kernel.
fn polls(profile: &str) -> bool {
    profile == "latency"
}

/// Our side's options, as the report prints them. The load spins in every pair, as
/// sockperf's sender does (see the module doc).
pub fn ours_options(profile: &str, flows: usize, size: usize) -> String {
    format!(
        "serve --profile {profile} --workers 1 + load --rate R --stamps --flows {flows} --size {size} --spin"
    )
}

/// The unloaded point's options: one request outstanding, stamped, spinning like the curve.
pub fn unloaded_options(profile: &str, size: usize) -> String {
    format!(
        "serve --profile {profile} --workers 1 + load --flows 1 --window 1 --stamps --size {size} --spin"
    )
}

/// sockperf's server flags: `--nonblocked` (it polls) for the polling pair.
fn sr_flags(profile: &str) -> &'static [&'static str] {
    if polls(profile) {
        &["--nonblocked"]
    } else {
        &[]
    }
}

/// sockperf's options, as the report prints them. Its client never runs `--nonblocked`:
/// its sender spins anyway, and a spinning receiver beside it on one CPU waits for its
/// scheduler slice (see the module doc).
pub fn theirs_options(profile: &str, size: usize) -> String {
    let nb = sr_flags(profile).join(" ");
    format!(
        "sockperf sr{}{nb} + sockperf under-load --mps R -m {size} --full-rtt --reply-every {} (its sender spins, its receiver blocks)",
        if nb.is_empty() { "" } else { " " },
        sockperf::REPLY_EVERY
    )
}

/// What one trial gave.
#[derive(Debug, Clone, Serialize)]
pub struct Trial {
    /// Requests per second sent over the measured window.
    pub tps: f64,
    pub lost: u64,
    /// Round trips from the send (ours: from the intended send) to the read.
    pub latency: Latency,
    /// Kernel departure to kernel arrival (ours only).
    pub rtt: Option<Latency>,
    /// Intended send to kernel departure: the generator's own lag (ours only).
    pub send_lag: Option<Latency>,
    /// Reply's kernel arrival to its read (ours only).
    pub recv_lag: Option<Latency>,
    /// How many round trips the figures are from.
    pub samples: u64,
    /// How the server's busy thread was scheduled over the run, when /proc could say.
    pub server: Option<sched::Sched>,
}

/// One cell over its repetitions: figures, or the reason there are none.
#[derive(Debug, Clone, Serialize)]
pub struct Row {
    pub profile: String,
    pub who: Who,
    /// 0 for the unloaded point.
    pub percent: u32,
    pub rate: f64,
    /// The unloaded point: one request outstanding, not a rate.
    pub unloaded: bool,
    pub options: String,
    /// What the latency figures are a sample of.
    pub sampling: String,
    pub tps: Option<Summary>,
    pub lost: u64,
    pub latency_p50_us: Option<Summary>,
    pub latency_p99_us: Option<Summary>,
    pub latency_p999_us: Option<Summary>,
    pub rtt_p50_us: Option<Summary>,
    pub rtt_p99_us: Option<Summary>,
    pub rtt_p999_us: Option<Summary>,
    pub send_lag_p50_us: Option<Summary>,
    pub send_lag_p99_us: Option<Summary>,
    pub recv_lag_p99_us: Option<Summary>,
    /// The server's busy thread over the trials ([`sched`]): sleeps, preemptions and
    /// microseconds waiting on the run queue, each per second.
    pub server_sleeps_per_s: Option<Summary>,
    pub server_preempted_per_s: Option<Summary>,
    pub server_run_delay_us_per_s: Option<Summary>,
    /// The client did not keep the rate ([`client_bound`]): the row describes the client.
    pub client_bound: bool,
    /// Why there are no figures (the cell was skipped or every trial failed).
    pub reason: Option<String>,
}

impl LatencyCurve {
    fn listen(&self, lab: &Lab<'_>) -> String {
        format!("{}:0", lab.topo.server_addr())
    }

    /// `firehose serve --profile P`, one worker, on the server CPUs.
    fn serve(&self, lab: &Lab<'_>, profile: &str, tag: &str) -> LabResult<firehose::Serving> {
        let args: Vec<String> = [
            "--listen",
            &self.listen(lab),
            "--workers",
            "1",
            "--profile",
            profile,
        ]
        .map(String::from)
        .to_vec();
        let cpus = lab.placement.server_cpus.clone();
        firehose::serve(lab, Side::Server, &cpus, &args, &format!("{tag}-serve"))
    }

    /// `firehose load` on the client CPU against `srv`, to its end.
    fn load(
        &self,
        lab: &Lab<'_>,
        srv: &firehose::Serving,
        flags: &[String],
        tag: &str,
    ) -> LabResult<LoadReport> {
        let json = Self::load_json(lab, tag);
        // A document left by an earlier run into the same directory is not this run's.
        let _ = std::fs::remove_file(&json);
        let cpu = lab.placement.client_cpus[..1].to_vec();
        let mut a = flags.to_vec();
        a.extend([
            "--warmup".to_string(),
            format!("{}", self.warmup.as_secs_f64()),
            "--duration".into(),
            format!("{}", self.duration.as_secs_f64()),
            "--cpus".into(),
            cpu[0].to_string(),
        ]);
        let argv = firehose::load(lab, &srv.listen, &a, &json, Some(srv.proc.pid()));
        let within = self.duration + self.warmup + Duration::from_secs(60);
        lab.run_to_end(Side::Client, &cpu, &argv, &format!("{tag}-load"), within)?;
        Ok(firehose::read_load(&json)?.0)
    }

    fn load_json(lab: &Lab<'_>, tag: &str) -> std::path::PathBuf {
        lab.workdir.join(format!("{tag}-load.json"))
    }

    /// Closed loop with enough requests in flight to fill batches: the profile's max tps.
    fn max_tps(&self, lab: &Lab<'_>, profile: &str) -> LabResult<f64> {
        let tag = format!("max-{profile}");
        let mut srv = self.serve(lab, profile, &tag)?;
        let flags: Vec<String> = ["--flows", "4", "--window", "32", "--size"]
            .map(String::from)
            .into_iter()
            .chain([self.size.to_string()])
            .collect();
        let r = self.load(lab, &srv, &flags, &tag);
        srv.proc.stop("TERM", Duration::from_secs(10));
        Ok(r?.tps)
    }

    /// The curve's load at `rate`: the arrivals both the search and the curve offer.
    fn open_flags(&self, rate: f64) -> Vec<String> {
        vec![
            "--rate".into(),
            format!("{rate:.0}"),
            "--stamps".into(),
            "--flows".into(),
            self.flows.to_string(),
            "--size".into(),
            self.size.to_string(),
            "--spin".into(),
        ]
    }

    /// The unloaded point's load ([`unloaded_options`]): one request outstanding.
    fn unloaded_flags(&self) -> Vec<String> {
        ["--flows", "1", "--window", "1", "--stamps", "--size"]
            .map(String::from)
            .into_iter()
            .chain([self.size.to_string(), "--spin".into()])
            .collect()
    }

    /// The highest open-loop rate `profile` sustains under the curve's arrivals, searched
    /// down from `closed` ([`search`]): one run like the curve's per step.
    fn open_max(&self, lab: &Lab<'_>, profile: &str, closed: f64) -> LabResult<MaxTps> {
        let mut steps: Vec<Step> = Vec::new();
        let (open_loop_tps, lower_bound) = loop {
            lab.check()?;
            match search::next(closed, &steps) {
                Next::Try(rate) => {
                    let tag = format!("max-{profile}-step-{}", steps.len() + 1);
                    let mut srv = self.serve(lab, profile, &tag)?;
                    let r = self.load(lab, &srv, &self.open_flags(rate), &tag);
                    srv.proc.stop("TERM", Duration::from_secs(10));
                    let r = match r {
                        Ok(r) => r,
                        Err(LabError::Interrupted) => return Err(LabError::Interrupted),
                        // load exits 1 when nothing completed, its document written: every
                        // request lost is a step that did not hold, not a failed search.
                        Err(e) => match firehose::read_load(&Self::load_json(lab, &tag)) {
                            Ok((r, _)) if r.completed == 0 && r.sent > 0 => r,
                            _ => return Err(e),
                        },
                    };
                    // Stamped from the transactions that completed: none, no lag read.
                    let lag = r
                        .parts
                        .as_ref()
                        .filter(|_| r.completed > 0)
                        .map(|p| p.send_lag_us.p50);
                    steps.push(Step::new(rate, sent_per_s(&r), r.lost, lag));
                }
                Next::Found { tps, lower_bound } => break (Some(tps), lower_bound),
                Next::NotFound => break (None, false),
            }
        };
        Ok(MaxTps {
            closed_loop_tps: closed,
            open_loop_tps,
            lower_bound,
            steps,
        })
    }

    fn ours(&self, lab: &Lab<'_>, c: &Cell, tag: &str) -> LabResult<Trial> {
        let mut srv = self.serve(lab, &c.profile, tag)?;
        let flags = if c.unloaded {
            self.unloaded_flags()
        } else {
            self.open_flags(c.rate)
        };
        let watch = sched::Watch::start(srv.proc.pid(), Some(WORKER));
        let r = self.load(lab, &srv, &flags, tag);
        let server = watch.and_then(sched::Watch::finish);
        srv.proc.stop("TERM", Duration::from_secs(10));
        let r = r?;
        Ok(Trial {
            tps: sent_per_s(&r),
            lost: r.lost,
            latency: Latency::from(&r.latency_us),
            rtt: r.parts.as_ref().map(|p| Latency::from(&p.rtt_us)),
            send_lag: r.parts.as_ref().map(|p| Latency::from(&p.send_lag_us)),
            recv_lag: r.parts.as_ref().map(|p| Latency::from(&p.recv_lag_us)),
            samples: r.completed,
            server,
        })
    }

    fn theirs(&self, lab: &Lab<'_>, c: &Cell, tag: &str) -> LabResult<Trial> {
        let flags = sr_flags(&c.profile);
        let port = proc::free_port()?;
        let addr = lab.topo.server_addr().to_string();
        let cpus = lab.placement.server_cpus.clone();
        let argv = sockperf::server(&addr, port, flags);
        let mut srv = lab.spawn(Side::Server, &cpus, &argv, &format!("{tag}-sockperf-sr"))?;
        let by = Instant::now() + Duration::from_secs(10);
        while !port_bound(srv.pid(), port) {
            if srv.exited().is_some() || Instant::now() > by {
                return Err(LabError::Run(format!(
                    "sockperf sr did not listen on port {port}: {}",
                    srv.stderr_tail()
                )));
            }
            lab.sleep_until(Instant::now() + Duration::from_millis(20))?;
        }
        // sockperf's own warm-up comes out of its run time.
        let secs =
            (self.duration + self.warmup).as_secs().max(1) + sockperf::WARMUP_MS.div_ceil(1000);
        let cpu = lab.placement.client_cpus[..1].to_vec();
        let argv = sockperf::under_load(&addr, port, self.size, secs, c.rate as u64, &[]);
        let within = Duration::from_secs(secs + 30);
        // sockperf's server reads and answers in its main thread.
        let watch = sched::Watch::start(srv.pid(), None);
        let done = lab.run_to_end(
            Side::Client,
            &cpu,
            &argv,
            &format!("{tag}-sockperf-ul"),
            within,
        );
        let server = watch.and_then(sched::Watch::finish);
        srv.stop("TERM", Duration::from_secs(5));
        let done = done?;
        let text = done.proc.stdout() + &done.proc.stderr();
        let r = sockperf::parse_client(&text).map_err(|e| {
            LabError::Run(format!(
                "could not read sockperf's output ({e}): {}",
                text.trim()
            ))
        })?;
        Ok(Trial {
            tps: per_s(r.sent, r.runtime_s),
            lost: r.dropped,
            latency: r.latency(),
            rtt: None,
            send_lag: None,
            recv_lag: None,
            samples: r.received,
            server,
        })
    }
}

impl Study for LatencyCurve {
    type Cell = Cell;
    type Measured = Trial;
    type Trial = Trial;
    type Row = Row;

    fn name(&self) -> String {
        "latency".into()
    }

    fn plan(&mut self, lab: &mut Lab<'_>) -> LabResult<Plan<Cell>> {
        if self.topology == Kind::Veth {
            lab.topo = Topology::veth(&run_id(None), 1)?;
        }
        // The max-tps runs are trials too: the lab's own waits stay off the server's CPUs.
        let _off = OffServer::enter(&lab.placement.server_cpus)?;
        let sockperf_here = cmd::installed("sockperf");
        let mut skipped = Vec::new();
        let mut cells = Vec::new();
        self.max_tps.clear();
        for p in self.profiles.clone() {
            lab.check()?;
            let m = match self.max_tps(lab, &p) {
                Ok(t) if t > 0.0 => match self.open_max(lab, &p, t) {
                    Ok(m) => Ok(m),
                    Err(LabError::Interrupted) => return Err(LabError::Interrupted),
                    Err(e) => Err(format!("closed loop {} tps; open loop: {e}", thousands(t))),
                },
                Ok(t) => Err(format!("the closed-loop run measured {t} tps")),
                Err(LabError::Interrupted) => return Err(LabError::Interrupted),
                Err(e) => Err(e.to_string()),
            };
            match &m {
                Ok(max) if max.open_loop_tps.is_none() => skipped.push(Skipped {
                    name: p.clone(),
                    reason: format!(
                        "its max tps could not be measured: {}: {}",
                        max.none_held().unwrap_or_default(),
                        search::steps_line(&max.steps)
                    ),
                }),
                Ok(max) => {
                    let open = max.open_loop_tps.unwrap_or_default();
                    cells.push(Cell {
                        profile: p.clone(),
                        who: Who::Firehose,
                        percent: 0,
                        rate: 0.0,
                        unloaded: true,
                    });
                    for &pct in &self.percents {
                        let rate = (open * f64::from(pct) / 100.0).round().max(1.0);
                        cells.push(Cell {
                            profile: p.clone(),
                            who: Who::Firehose,
                            percent: pct,
                            rate,
                            unloaded: false,
                        });
                        let c = Cell {
                            profile: p.clone(),
                            who: Who::Sockperf,
                            percent: pct,
                            rate,
                            unloaded: false,
                        };
                        if sockperf_here {
                            cells.push(c);
                        } else {
                            skipped.push(Skipped {
                                name: self.cell_name(&c),
                                reason: format!(
                                    "sockperf is not installed ({})",
                                    cmd::install_hint("sockperf")
                                ),
                            });
                        }
                    }
                }
                Err(why) => skipped.push(Skipped {
                    name: p.clone(),
                    reason: format!("its max tps could not be measured: {why}"),
                }),
            }
            self.max_tps.push((p, m));
        }
        let mut notes = vec![
            format!(
                "{} topology; servers on CPUs {:?}, both clients on CPU {}; {} flows of {} B requests; {:.0} s warm-up + {:.0} s measured per run",
                self.topology.name(),
                lab.placement.server_cpus,
                lab.placement.client_cpus[0],
                self.flows,
                self.size,
                self.warmup.as_secs_f64(),
                self.duration.as_secs_f64()
            ),
            format!(
                "sockperf times 1 reply in {} (--reply-every {}) and prints round trips with --full-rtt (its default prints half of one); its server answers only those, so at one rate it sends 1 reply where firehose's sends {}; its figures run from its sendto call to its recvfrom's return, firehose's latency from the intended send to the reply's kernel arrival stamp (send_lag + rtt: the wait for the read, recv_lag, is outside it); it has no kernel stamps, so its rtt columns are empty",
                sockperf::REPLY_EVERY,
                sockperf::REPLY_EVERY,
                sockperf::REPLY_EVERY
            ),
            "server sleeps/s, preempted/s, run delay us/s: the server's busy thread over each run, from /proc (voluntary and involuntary context switches, schedstat's run-queue wait): firehose's fh-worker-0, sockperf's main thread".to_string(),
        ];
        for (p, m) in &self.max_tps {
            if let Ok(max) = m {
                notes.push(max_line(p, max));
                notes.push(format!(
                    "{p}: firehose: {}; unloaded: {}; sockperf: {}",
                    ours_options(p, self.flows, self.size),
                    unloaded_options(p, self.size),
                    theirs_options(p, self.size)
                ));
            }
        }
        Ok(Plan {
            cells,
            skipped,
            notes,
        })
    }

    fn cell_name(&self, c: &Cell) -> String {
        let who = match c.who {
            Who::Firehose => "firehose",
            Who::Sockperf => "sockperf",
        };
        if c.unloaded {
            format!("{} {who} unloaded", c.profile)
        } else {
            format!("{} {who} {}%", c.profile, c.percent)
        }
    }

    fn trial(&mut self, lab: &mut Lab<'_>, c: &Cell, rep: usize) -> LabResult<Outcome<Trial>> {
        let tag = format!(
            "{}-{}-{}-{}",
            c.profile,
            match c.who {
                Who::Firehose => "fh",
                Who::Sockperf => "sp",
            },
            if c.unloaded {
                "unloaded".to_string()
            } else {
                c.percent.to_string()
            },
            rep + 1
        );
        let r = match c.who {
            Who::Firehose => self.ours(lab, c, &tag),
            Who::Sockperf => self.theirs(lab, c, &tag),
        };
        match r {
            Ok(t) => Ok(Outcome::Done(t)),
            Err(LabError::Interrupted) => Err(LabError::Interrupted),
            Err(e) => Ok(Outcome::Failed(e.to_string())),
        }
    }

    fn metrics(&self, _c: &Cell, m: Trial) -> Trial {
        m
    }

    fn rows(&self, ran: &Ran<Cell, Trial>) -> Vec<Row> {
        ran.cells.iter().map(|c| row(self, c)).collect()
    }

    fn page(&self, ran: &Ran<Cell, Trial>, rows: &[Row]) -> Page {
        page(self, ran, rows)
    }

    fn extra(
        &self,
        _ran: &Ran<Cell, Trial>,
        rows: &[Row],
    ) -> serde_json::Map<String, serde_json::Value> {
        let mut m = serde_json::Map::new();
        m.insert("topology".into(), self.topology.name().into());
        m.insert("duration_s".into(), self.duration.as_secs_f64().into());
        m.insert("percents".into(), serde_json::json!(self.percents));
        m.insert("max_tps".into(), max_json(&self.max_tps).into());
        m.insert("ratios".into(), serde_json::json!(ratios(rows)));
        m.insert(
            "goals".into(),
            serde_json::json!(goals(&self.profiles, &self.max_tps, rows)),
        );
        m
    }
}

/// Requests sent per second over the measured window: what the generator offered (its
/// `tps` counts completions, short of it by what was lost).
fn sent_per_s(r: &LoadReport) -> f64 {
    per_s(r.sent, r.duration_s)
}

/// `n` over `secs` seconds; 0 for a run that measured no time.
fn per_s(n: u64, secs: f64) -> f64 {
    if secs > 0.0 {
        n as f64 / secs
    } else {
        0.0
    }
}

/// What the percents are of, as the JSON names it.
pub const PERCENTS_OF: &str = "open_loop_tps";

/// The document's `max_tps`: per profile both maxima, which one the percents are of
/// (`tps` is that one), whether it is a lower bound, and the search's steps; or why none.
pub fn max_json(
    max: &[(String, Result<MaxTps, String>)],
) -> serde_json::Map<String, serde_json::Value> {
    max.iter()
        .map(|(p, m)| {
            let v = match m {
                Ok(m) => {
                    let mut v = serde_json::json!({
                        "tps": m.open_loop_tps,
                        "percents_of": PERCENTS_OF,
                        "closed_loop_tps": m.closed_loop_tps,
                        "open_loop_tps": m.open_loop_tps,
                        "lower_bound": m.lower_bound,
                        "steps": m.steps,
                    });
                    if let Some(why) = m.none_held() {
                        v["reason"] = why.into();
                    }
                    v
                }
                Err(e) => serde_json::json!({ "reason": e }),
            };
            (p.clone(), v)
        })
        .collect()
}

/// One profile's maxima as the report prints them.
pub fn max_line(p: &str, m: &MaxTps) -> String {
    let Some(open) = m.open_loop_tps else {
        return format!(
            "{p}: {}; steps {}",
            m.none_held().unwrap_or_default(),
            search::steps_line(&m.steps)
        );
    };
    format!(
        "{p}: max {} tps under the curve's arrivals (the percents are of it{}); closed loop (4 flows x window 32) {} tps ({:.2}x); steps {}",
        thousands(open),
        if m.lower_bound {
            "; a lower bound of the server's: the rate above it was client-bound"
        } else {
            ""
        },
        thousands(m.closed_loop_tps),
        open / m.closed_loop_tps,
        search::steps_line(&m.steps)
    )
}

fn row(s: &LatencyCurve, c: &crate::study::CellRun<Cell, Trial>) -> Row {
    let t = &c.trials;
    let sum = |f: fn(&Trial) -> Option<f64>| Summary::of(t.iter().filter_map(f));
    let reason = if !t.is_empty() {
        None
    } else if let Some(why) = &c.skipped {
        Some(why.clone())
    } else if !c.failures.is_empty() {
        Some(format!("every trial failed: {}", c.failures.join("; ")))
    } else {
        Some("not run".into())
    };
    let (options, sampling) = match c.cell.who {
        Who::Firehose if c.cell.unloaded => (
            unloaded_options(&c.cell.profile, s.size),
            "every reply".to_string(),
        ),
        Who::Firehose => (
            ours_options(&c.cell.profile, s.flows, s.size),
            "every reply".to_string(),
        ),
        Who::Sockperf => (
            theirs_options(&c.cell.profile, s.size),
            format!("1 reply in {}", sockperf::REPLY_EVERY),
        ),
    };
    let mut r = Row {
        profile: c.cell.profile.clone(),
        who: c.cell.who,
        percent: c.cell.percent,
        rate: c.cell.rate,
        unloaded: c.cell.unloaded,
        options,
        sampling,
        tps: sum(|t| Some(t.tps)),
        lost: t.iter().map(|t| t.lost).sum(),
        latency_p50_us: sum(|t| t.latency.p50),
        latency_p99_us: sum(|t| t.latency.p99),
        latency_p999_us: sum(|t| t.latency.p999),
        rtt_p50_us: sum(|t| t.rtt.as_ref()?.p50),
        rtt_p99_us: sum(|t| t.rtt.as_ref()?.p99),
        rtt_p999_us: sum(|t| t.rtt.as_ref()?.p999),
        send_lag_p50_us: sum(|t| t.send_lag.as_ref()?.p50),
        send_lag_p99_us: sum(|t| t.send_lag.as_ref()?.p99),
        recv_lag_p99_us: sum(|t| t.recv_lag.as_ref()?.p99),
        server_sleeps_per_s: sum(|t| Some(t.server?.sleeps_per_s)),
        server_preempted_per_s: sum(|t| Some(t.server?.preempted_per_s)),
        server_run_delay_us_per_s: sum(|t| Some(t.server?.run_delay_us_per_s)),
        client_bound: false,
        reason,
    };
    r.client_bound = client_bound(&r);
    r
}

/// firehose's latency over sockperf's at one profile and rate (the goal: <= 0.8).
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Ratio {
    pub profile: String,
    pub percent: u32,
    pub p50: Option<f64>,
    pub p99: Option<f64>,
}

/// A ratio per profile and rate where both sides have figures.
pub fn ratios(rows: &[Row]) -> Vec<Ratio> {
    let ratio = |a: &Option<Summary>, b: &Option<Summary>| match (a, b) {
        (Some(a), Some(b)) if b.median > 0.0 => Some(a.median / b.median),
        _ => None,
    };
    rows.iter()
        .filter(|r| r.who == Who::Firehose && !r.unloaded)
        .filter_map(|ours| {
            let theirs = rows.iter().find(|t| {
                t.who == Who::Sockperf && t.profile == ours.profile && t.percent == ours.percent
            })?;
            Some(Ratio {
                profile: ours.profile.clone(),
                percent: ours.percent,
                p50: ratio(&ours.latency_p50_us, &theirs.latency_p50_us),
                p99: ratio(&ours.latency_p99_us, &theirs.latency_p99_us),
            })
        })
        .filter(|r| r.p50.is_some() || r.p99.is_some())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(who: Who, p50: f64, p99: f64) -> Row {
        let s = |v: f64| Summary::of([v]);
        Row {
            profile: "tuned".into(),
            who,
            percent: 50,
            rate: 1000.0,
            unloaded: false,
            options: String::new(),
            sampling: String::new(),
            tps: s(1000.0),
            lost: 0,
            latency_p50_us: s(p50),
            latency_p99_us: s(p99),
            latency_p999_us: None,
            rtt_p50_us: None,
            rtt_p99_us: None,
            rtt_p999_us: None,
            send_lag_p50_us: None,
            send_lag_p99_us: None,
            recv_lag_p99_us: None,
            server_sleeps_per_s: None,
            server_preempted_per_s: None,
            server_run_delay_us_per_s: None,
            client_bound: false,
            reason: None,
        }
    }

    #[test]
    fn ratios_pair_each_profile_and_rate_with_sockperf() {
        let rows = [
            row(Who::Firehose, 8.0, 40.0),
            row(Who::Sockperf, 10.0, 100.0),
        ];
        assert_eq!(
            ratios(&rows),
            [Ratio {
                profile: "tuned".into(),
                percent: 50,
                p50: Some(0.8),
                p99: Some(0.4)
            }]
        );
        assert!(ratios(&rows[..1]).is_empty());
    }

    #[test]
    fn both_sides_options_name_how_they_wait() {
        assert!(ours_options("latency", 4, 100).ends_with("--spin"));
        assert!(ours_options("tuned", 4, 100).ends_with("--spin"));
        assert!(theirs_options("latency", 100).contains("sr --nonblocked + "));
        assert_eq!(
            theirs_options("latency", 100).matches("nonblocked").count(),
            1
        );
        assert!(!theirs_options("tuned", 100).contains("nonblocked"));
        assert!(theirs_options("tuned", 100).contains("--reply-every 100"));
    }

    #[test]
    fn the_document_names_both_maxima_and_which_the_percents_are_of() {
        let steps = vec![
            Step::new(200_000.0, 200_000.0, 41_319, Some(3.0)),
            Step::new(160_000.0, 160_000.0, 0, Some(3.0)),
        ];
        let max = vec![
            (
                "latency".to_string(),
                Ok(MaxTps {
                    closed_loop_tps: 200_000.0,
                    open_loop_tps: Some(160_000.0),
                    lower_bound: false,
                    steps,
                }),
            ),
            ("tuned".to_string(), Err("the server did not start".into())),
        ];
        let v = serde_json::Value::Object(max_json(&max));
        let l = &v["latency"];
        assert_eq!(l["tps"], 160_000.0);
        assert_eq!(l["percents_of"], "open_loop_tps");
        assert_eq!(l["open_loop_tps"], l["tps"]);
        assert_eq!(l["closed_loop_tps"], 200_000.0);
        assert_eq!(l["lower_bound"], false);
        assert_eq!(l["steps"][0]["outcome"], "lost");
        assert_eq!(l["steps"][0]["lost"], 41_319);
        assert_eq!(l["steps"][1]["outcome"], "held");
        assert_eq!(l["steps"][1]["rate"], 160_000.0);
        assert_eq!(v["tuned"]["reason"], "the server did not start");
        assert!(v["tuned"]["tps"].is_null());
        let Ok(m) = &max[0].1 else { unreachable!() };
        assert_eq!(
            max_line("latency", m),
            "latency: max 160,000 tps under the curve's arrivals (the percents are of it); closed loop (4 flows x window 32) 200,000 tps (0.80x); steps 200,000 lost 41,319, 160,000 held"
        );
        let bound = MaxTps {
            lower_bound: true,
            ..m.clone()
        };
        assert!(max_line("latency", &bound).contains("a lower bound of the server's"));
        // No step held: no max the percents could be of, and why.
        let none = vec![(
            "latency".to_string(),
            Ok(MaxTps {
                open_loop_tps: None,
                ..m.clone()
            }),
        )];
        let v = serde_json::Value::Object(max_json(&none));
        assert!(v["latency"]["tps"].is_null(), "{v}");
        assert_eq!(v["latency"]["closed_loop_tps"], 200_000.0);
        assert_eq!(
            v["latency"]["reason"],
            "no open-loop rate held in 2 steps down from the closed-loop max 200,000"
        );
        let Ok(n) = &none[0].1 else { unreachable!() };
        assert_eq!(
            max_line("latency", n),
            "latency: no open-loop rate held in 2 steps down from the closed-loop max 200,000; steps 200,000 lost 41,319, 160,000 held"
        );
        assert!(unloaded_options("latency", 100).contains("--flows 1 --window 1 --stamps"));
        assert!(unloaded_options("latency", 100).ends_with("--spin"));
    }
}
