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
use anyhow::{bail, Context, Result};
use firehose_lab::proc::{self, Proc};
use firehose_lab::sample::port_bound;
use firehose_lab::stats::Summary;
use serde::Serialize;
use std::time::{Duration, Instant};

/// How both sides of a pair wait for a datagram.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub(super) enum Pair {
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
pub(super) enum Side {
    Firehose,
    Sockperf,
}

/// One side of a pair, one repetition.
#[derive(Debug, Clone, Serialize)]
pub(super) struct PingPong {
    pair: Pair,
    side: Side,
    /// The commands' options, as the table prints them.
    options: String,
    repetition: usize,
    p50_us: f64,
    p99_us: f64,
    mean_us: f64,
}

impl Bench<'_> {
    /// `sockperf sr` on the server CPU, once its port is bound.
    fn start_sockperf_server(&self, port: u16, tag: &str, flags: &[&str]) -> Result<Proc> {
        let mut cmd = proc::pinned(&self.a.server_cpus.to_vec(), "sockperf");
        cmd.args(["sr", "-i", "127.0.0.1", "-p", &port.to_string()]);
        cmd.args(flags);
        let mut p = Proc::spawn(cmd, &format!("{tag}-sockperf-sr"), &self.dir)?;
        let by = Instant::now() + Duration::from_secs(10);
        while !port_bound(p.pid(), port) {
            if p.exited().is_some() || Instant::now() > by {
                bail!(
                    "sockperf sr did not listen on port {port}: {}",
                    p.stderr_tail()
                );
            }
            proc::sleep_until(Instant::now() + Duration::from_millis(20), self.stop())?;
        }
        Ok(p)
    }

    /// `sockperf pp` on the client CPU: (p50, p99, mean) of the full round trip in us.
    fn sockperf_pp(&self, port: u16, tag: &str, flags: &[&str]) -> Result<(f64, f64, f64)> {
        let mut cmd = proc::pinned(&self.a.client_cpus.to_vec()[..1], "sockperf");
        cmd.args([
            "pp",
            "-i",
            "127.0.0.1",
            "-p",
            &port.to_string(),
            "-m",
            "100",
        ]);
        let secs = format!("{}", self.a.duration.as_secs().max(1));
        cmd.args(["-t", &secs, "--full-rtt"]).args(flags);
        let mut p = Proc::spawn(cmd, &format!("{tag}-sockperf-pp"), &self.dir)?;
        let by = Instant::now() + self.a.duration + Duration::from_secs(30);
        p.wait_until(by, self.stop())?
            .context("sockperf pp did not finish")?;
        let text = p.stdout() + &p.stderr();
        let r = firehose_lab::peers::sockperf::parse_client(&text).map_err(|e| {
            anyhow::anyhow!("could not read sockperf's output ({e}): {}", text.trim())
        })?;
        let l = r.latency();
        match (l.p50, l.p99, l.mean) {
            (Some(p50), Some(p99), Some(mean)) => Ok((p50, p99, mean)),
            _ => bail!("sockperf printed no p50/p99/mean: {}", text.trim()),
        }
    }

    /// Both pairs, each side after the other (A B A B across repetitions).
    pub(super) fn measure_pingpong(&self, rep: usize, sockperf: bool) -> Result<Vec<PingPong>> {
        let mut out = Vec::new();
        for pair in Pair::ALL {
            let tag = format!("pp-{rep}-{}", pair.name());
            let (profile, flags) = pair.ours();
            let srv = self.start_serve(profile, &tag)?;
            let mut all = vec!["--flows", "1", "--window", "1", "--size", "100"];
            all.extend(flags);
            let l = self.run_load(&srv, &self.load_flags("0.5", &all), &tag)?;
            srv.finish()?;
            out.push(PingPong {
                pair,
                side: Side::Firehose,
                options: pair.ours_options(),
                repetition: rep,
                p50_us: l.latency_us.p50,
                p99_us: l.latency_us.p99,
                mean_us: l.latency_us.mean,
            });
            if sockperf {
                let port = proc::free_port()?;
                let srv = self.start_sockperf_server(port, &tag, pair.theirs())?;
                let (p50_us, p99_us, mean_us) = self.sockperf_pp(port, &tag, pair.theirs())?;
                drop(srv);
                out.push(PingPong {
                    pair,
                    side: Side::Sockperf,
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
}

/// Ours over theirs for each repetition in which both sides of `pair` ran.
fn ratios(pp: &[PingPong], pair: Pair, metric: fn(&PingPong) -> f64) -> Vec<f64> {
    let side = |s: Side, rep: usize| {
        pp.iter()
            .find(|x| x.pair == pair && x.side == s && x.repetition == rep)
            .map(metric)
    };
    let mut reps: Vec<usize> = pp.iter().map(|x| x.repetition).collect();
    reps.sort_unstable();
    reps.dedup();
    reps.into_iter()
        .filter_map(
            |r| match (side(Side::Firehose, r), side(Side::Sockperf, r)) {
                (Some(o), Some(t)) if t > 0.0 => Some(o / t),
                _ => None,
            },
        )
        .collect()
}

/// The ping-pong table: each side of each pair with its options, then the ratio.
pub(super) fn print_table(pp: &[PingPong], sockperf: bool) {
    if pp.is_empty() {
        return;
    }
    say!("");
    say!(
        "{:<9} {:<10} {:<52} {:>20} {:>20} {:>20}",
        "ping-pong",
        "side",
        "options (1 flow, 1 in flight, 100 B)",
        "p50 RTT us",
        "p99 RTT us",
        "mean RTT us"
    );
    for pair in Pair::ALL {
        for side in [Side::Firehose, Side::Sockperf] {
            let rows: Vec<&PingPong> = pp
                .iter()
                .filter(|x| x.pair == pair && x.side == side)
                .collect();
            let Some(first) = rows.first() else { continue };
            let get = |g: fn(&PingPong) -> f64| rows.iter().map(|x| g(x)).collect::<Vec<_>>();
            say!(
                "{:<9} {:<10} {:<52} {:>20} {:>20} {:>20}",
                pair.name(),
                if side == Side::Firehose {
                    "firehose"
                } else {
                    "sockperf"
                },
                first.options,
                fmt_mmm(&get(|x| x.p50_us), 1, false),
                fmt_mmm(&get(|x| x.p99_us), 1, false),
                fmt_mmm(&get(|x| x.mean_us), 1, false)
            );
        }
        let r = |m: fn(&PingPong) -> f64| ratios(pp, pair, m);
        if !r(|x| x.p50_us).is_empty() {
            say!(
                "{:<9} {:<10} {:<52} {:>20} {:>20} {:>20}",
                pair.name(),
                "ratio",
                "firehose / sockperf, per repetition",
                fmt_mmm(&r(|x| x.p50_us), 2, false),
                fmt_mmm(&r(|x| x.p99_us), 2, false),
                fmt_mmm(&r(|x| x.mean_us), 2, false)
            );
        }
    }
    if !sockperf {
        say!("(sockperf is not installed: `apt-get install sockperf` or `make peers` to compare)");
    }
}

/// The ping-pong target of each pair: (name, met?, detail); `None` when not measured.
pub(super) fn targets(
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

    fn pp(pair: Pair, side: Side, rep: usize, p50: f64) -> PingPong {
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
            pp(Pair::Spinning, Side::Firehose, 1, 3.0),
            pp(Pair::Spinning, Side::Sockperf, 1, 4.0),
            pp(Pair::Spinning, Side::Firehose, 2, 2.0),
            // Repetition 2 has no sockperf side; blocking has only ours.
            pp(Pair::Blocking, Side::Firehose, 1, 60.0),
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
