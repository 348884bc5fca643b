//! Ping-pong RTT as like-for-like pairs: one request in flight, 100 bytes, server on the
//! server CPU and client on the client CPU, ours against sockperf's server and client.
//!
//! Each pair runs both sides the same way, so a ratio compares the programs rather than
//! their waiting strategies: in the blocking pair both servers and both clients sleep in
//! the kernel until a datagram arrives; in the spinning pair both poll non-blocking
//! sockets on a busy CPU. The pairs stay whole (our server with our client, sockperf's with
//! sockperf's): sockperf's client expects its server to rewrite a header flag, and sockperf
//! sr answers only sockperf-framed requests.

use super::{fmt_mmm, Bench};
use crate::peers::sockperf;
use crate::proc::{self, Proc};
use crate::report::page::{Align, Column, Table, TextTable};
use crate::sample::port_bound;
use crate::stats::Summary;
use crate::study::Lab;
use crate::topology::Side;
use crate::{LabError, LabResult};
use serde::Serialize;
use std::time::{Duration, Instant};

/// How both sides of a pair wait for a datagram.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Pair {
    /// Both sleep in recvfrom until the datagram arrives.
    Blocking,
    /// Both poll non-blocking sockets without sleeping.
    Spinning,
}

impl Pair {
    const ALL: [Pair; 2] = [Pair::Blocking, Pair::Spinning];

    fn name(self) -> &'static str {
        match self {
            Pair::Blocking => "blocking",
            Pair::Spinning => "spinning",
        }
    }

    /// Our server profile and load flags.
    fn ours(self) -> (&'static str, &'static [&'static str]) {
        match self {
            Pair::Blocking => ("naive", &[]),
            Pair::Spinning => ("latency", &["--spin"]),
        }
    }

    /// Flags of both `sockperf sr` and `sockperf pp`.
    fn theirs(self) -> &'static [&'static str] {
        match self {
            Pair::Blocking => &[],
            Pair::Spinning => &["--nonblocked"],
        }
    }

    fn ours_options(self) -> String {
        let (profile, flags) = self.ours();
        let load = ["load"].iter().chain(flags).copied().collect::<Vec<_>>();
        format!("serve --profile {profile} + {}", load.join(" "))
    }

    fn theirs_options(self) -> String {
        let f: String = self.theirs().iter().map(|x| format!(" {x}")).collect();
        format!("sockperf sr{f} + sockperf pp{f}")
    }
}

/// Who ran a side of a pair.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Who {
    Firehose,
    Sockperf,
}

/// One side of a pair, one repetition.
#[derive(Debug, Clone, Serialize)]
pub struct PingPong {
    pair: Pair,
    side: Who,
    /// The commands' options, as the table prints them.
    options: String,
    repetition: usize,
    p50_us: f64,
    p99_us: f64,
    mean_us: f64,
}

/// `sockperf sr` on the server CPUs, once its port is bound.
fn sockperf_server(lab: &Lab<'_>, port: u16, tag: &str, flags: &[&str]) -> LabResult<Proc> {
    let cpus = lab.placement.server_cpus.clone();
    let argv = sockperf::server("127.0.0.1", port, flags);
    let mut p = lab.spawn(Side::Server, &cpus, &argv, &format!("{tag}-sockperf-sr"))?;
    let by = Instant::now() + Duration::from_secs(10);
    while !port_bound(p.pid(), port) {
        if p.exited().is_some() || Instant::now() > by {
            return Err(LabError::Run(format!(
                "sockperf sr did not listen on port {port}: {}",
                p.stderr_tail()
            )));
        }
        lab.sleep_until(Instant::now() + Duration::from_millis(20))?;
    }
    Ok(p)
}

/// `sockperf ping-pong` on the client CPU: (p50, p99, mean) of the full round trip in us.
fn sockperf_pp(
    b: &Bench,
    lab: &Lab<'_>,
    port: u16,
    tag: &str,
    flags: &[&str],
) -> LabResult<(f64, f64, f64)> {
    let cpus = lab.placement.client_cpus[..1].to_vec();
    let secs = b.duration.as_secs().max(1);
    let argv = sockperf::ping_pong("127.0.0.1", port, 100, secs, None, flags);
    let mut p = lab.spawn(Side::Client, &cpus, &argv, &format!("{tag}-sockperf-pp"))?;
    let by = Instant::now() + b.duration + Duration::from_secs(30);
    if p.wait_until(by, Some(lab.stop))?.is_none() {
        return Err(LabError::Run("sockperf pp did not finish".into()));
    }
    let text = p.stdout() + &p.stderr();
    let r = sockperf::parse_client(&text).map_err(|e| {
        LabError::Run(format!(
            "could not read sockperf's output ({e}): {}",
            text.trim()
        ))
    })?;
    let l = r.latency();
    match (l.p50, l.p99, l.mean) {
        (Some(p50), Some(p99), Some(mean)) => Ok((p50, p99, mean)),
        _ => Err(LabError::Run(format!(
            "sockperf printed no p50/p99/mean: {}",
            text.trim()
        ))),
    }
}

/// Both pairs, each side after the other (A B A B across repetitions).
pub fn measure(
    b: &Bench,
    lab: &Lab<'_>,
    rep: usize,
    with_sockperf: bool,
) -> LabResult<Vec<PingPong>> {
    let mut out = Vec::new();
    for pair in Pair::ALL {
        let tag = format!("pp-{rep}-{}", pair.name());
        let (profile, flags) = pair.ours();
        let (srv, stats) = b.serve(lab, profile, &tag)?;
        let mut all = vec!["--flows", "1", "--window", "1", "--size", "100"];
        all.extend(flags);
        let (l, _) = b.load(lab, &srv, "0.5", &all, &tag)?;
        super::finish(srv, &stats)?;
        out.push(PingPong {
            pair,
            side: Who::Firehose,
            options: pair.ours_options(),
            repetition: rep,
            p50_us: l.latency_us.p50,
            p99_us: l.latency_us.p99,
            mean_us: l.latency_us.mean,
        });
        if with_sockperf {
            let port = proc::free_port()?;
            let srv = sockperf_server(lab, port, &tag, pair.theirs())?;
            let (p50_us, p99_us, mean_us) = sockperf_pp(b, lab, port, &tag, pair.theirs())?;
            drop(srv);
            out.push(PingPong {
                pair,
                side: Who::Sockperf,
                options: pair.theirs_options(),
                repetition: rep,
                p50_us,
                p99_us,
                mean_us,
            });
        }
    }
    Ok(out)
}

/// Ours over theirs for each repetition in which both sides of `pair` ran.
fn ratios(pp: &[PingPong], pair: Pair, metric: fn(&PingPong) -> f64) -> Vec<f64> {
    let side = |s: Who, rep: usize| {
        pp.iter()
            .find(|x| x.pair == pair && x.side == s && x.repetition == rep)
            .map(metric)
    };
    let mut reps: Vec<usize> = pp.iter().map(|x| x.repetition).collect();
    reps.sort_unstable();
    reps.dedup();
    reps.into_iter()
        .filter_map(|r| match (side(Who::Firehose, r), side(Who::Sockperf, r)) {
            (Some(o), Some(t)) if t > 0.0 => Some(o / t),
            _ => None,
        })
        .collect()
}

/// The ping-pong table: each side of each pair with its options, then the ratio;
/// `None` when ping-pong did not run.
pub fn table(pp: &[PingPong]) -> Option<Table> {
    if pp.is_empty() {
        return None;
    }
    let mut rows = Vec::new();
    let mmm = |v: Vec<f64>, d: usize| fmt_mmm(&Summary::of(v), d, false);
    for pair in Pair::ALL {
        for side in [Who::Firehose, Who::Sockperf] {
            let mine: Vec<&PingPong> = pp
                .iter()
                .filter(|x| x.pair == pair && x.side == side)
                .collect();
            let Some(first) = mine.first() else { continue };
            let get = |g: fn(&PingPong) -> f64| mine.iter().map(|x| g(x)).collect::<Vec<_>>();
            rows.push(vec![
                pair.name().to_string(),
                if side == Who::Firehose {
                    "firehose"
                } else {
                    "sockperf"
                }
                .to_string(),
                first.options.clone(),
                mmm(get(|x| x.p50_us), 1),
                mmm(get(|x| x.p99_us), 1),
                mmm(get(|x| x.mean_us), 1),
            ]);
        }
        let r = |m: fn(&PingPong) -> f64| ratios(pp, pair, m);
        if !r(|x| x.p50_us).is_empty() {
            rows.push(vec![
                pair.name().to_string(),
                "ratio".to_string(),
                "firehose / sockperf, per repetition".to_string(),
                mmm(r(|x| x.p50_us), 2),
                mmm(r(|x| x.p99_us), 2),
                mmm(r(|x| x.mean_us), 2),
            ]);
        }
    }
    Some(Table {
        title: Some("Ping-pong".into()),
        columns: vec![
            Column::fixed("ping-pong", 9, Align::Left),
            Column::fixed("side", 10, Align::Left),
            Column::fixed("options (1 flow, 1 in flight, 100 B)", 52, Align::Left),
            Column::fixed("p50 RTT us", 20, Align::Right),
            Column::fixed("p99 RTT us", 20, Align::Right),
            Column::fixed("mean RTT us", 20, Align::Right),
        ],
        rows,
        dim: Vec::new(),
        text: TextTable::Padded {
            gap: 1,
            blank_before: true,
        },
    })
}

/// The ping-pong target of each pair: (name, met?, detail); `None` when not measured.
pub fn targets(
    pp: &[PingPong],
    sockperf: bool,
    skipped: bool,
) -> Vec<(String, Option<bool>, String)> {
    let med = |v: Vec<f64>| Summary::of(v).map(|s| s.median);
    Pair::ALL
        .iter()
        .map(|&pair| {
            let name = format!("ping-pong p50, p99 <= 0.8x sockperf's ({})", pair.name());
            let p50 = med(ratios(pp, pair, |x| x.p50_us));
            let p99 = med(ratios(pp, pair, |x| x.p99_us));
            match (p50, p99) {
                (Some(a), Some(b)) => (
                    name,
                    Some(a <= 0.8 && b <= 0.8),
                    format!("p50 {a:.2}x, p99 {b:.2}x"),
                ),
                _ if skipped => (name, None, "(--no-pingpong)".into()),
                _ if !sockperf => (name, None, "(sockperf not installed)".into()),
                _ => (name, None, "(no repetition measured both sides)".into()),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pp(pair: Pair, side: Who, rep: usize, p50: f64) -> PingPong {
        PingPong {
            pair,
            side,
            options: String::new(),
            repetition: rep,
            p50_us: p50,
            p99_us: 2.0 * p50,
            mean_us: p50,
        }
    }

    #[test]
    fn pairs_name_their_options() {
        assert_eq!(
            Pair::Blocking.ours_options(),
            "serve --profile naive + load"
        );
        assert_eq!(Pair::Blocking.theirs_options(), "sockperf sr + sockperf pp");
        assert_eq!(
            Pair::Spinning.ours_options(),
            "serve --profile latency + load --spin"
        );
        assert_eq!(
            Pair::Spinning.theirs_options(),
            "sockperf sr --nonblocked + sockperf pp --nonblocked"
        );
    }

    #[test]
    fn ratios_pair_sides_of_one_repetition_and_targets_say_why_unmeasured() {
        let v = vec![
            pp(Pair::Spinning, Who::Firehose, 1, 3.0),
            pp(Pair::Spinning, Who::Sockperf, 1, 4.0),
            pp(Pair::Spinning, Who::Firehose, 2, 2.0),
            // Repetition 2 has no sockperf side; blocking has only ours.
            pp(Pair::Blocking, Who::Firehose, 1, 60.0),
        ];
        assert_eq!(ratios(&v, Pair::Spinning, |x| x.p50_us), vec![0.75]);
        assert!(ratios(&v, Pair::Blocking, |x| x.p50_us).is_empty());
        let t = targets(&v, true, false);
        assert_eq!(t[0].1, None, "blocking: no sockperf side");
        assert_eq!(
            (t[1].1, t[1].2.as_str()),
            (Some(true), "p50 0.75x, p99 0.75x")
        );
        let t = targets(&v[..1], false, false);
        assert!(t
            .iter()
            .all(|x| x.1.is_none() && x.2 == "(sockperf not installed)"));
    }
}
