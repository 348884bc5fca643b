//! Issue 25's curve goals, judged from the rows, so a run's summary says for each one
//! whether it was met, not met, or cannot be judged because the generator (not the server)
//! set the figures.

use super::{Row, Who};
use serde::Serialize;

/// Below this share of the rate asked, the generator did not offer the load.
const OFFERED_SHARE: f64 = 0.95;
/// Above this median send_lag p50 the typical request left late: a backlog in the
/// generator, not a stall in its tail.
const BACKLOG_SEND_LAG_P50_US: f64 = 100.0;
/// "No loss below 80% of max tps".
const LOSS_FREE_BELOW_PERCENT: u32 = 80;
/// "rtt p99 <= 3x the unloaded p50 at 50% of max tps".
const TAIL_PERCENT: u32 = 50;
const TAIL_FACTOR: f64 = 3.0;
/// "firehose's p50 and p99 at each rate <= 0.8x sockperf's".
const PEER_RATIO: f64 = 0.8;

/// A row whose client could not keep the rate: its median tps under 95% of the rate asked,
/// or (ours, from the kernel's departure stamps) its median send_lag p50 above 100 us. Its
/// latency describes the client, not the server.
pub fn client_bound(r: &Row) -> bool {
    let short = r.tps.is_some_and(|t| t.median < OFFERED_SHARE * r.rate);
    let backlog = r
        .send_lag_p50_us
        .is_some_and(|s| s.median > BACKLOG_SEND_LAG_P50_US);
    short || backlog
}

/// What a run says about one goal.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Verdict {
    Met,
    NotMet,
    /// Every row that could decide it was client-bound.
    ClientBound,
    /// The rows it needs were not run (rates, profiles or sockperf missing).
    NotMeasured,
}

impl Verdict {
    pub fn text(self) -> &'static str {
        match self {
            Verdict::Met => "met",
            Verdict::NotMet => "not met",
            Verdict::ClientBound => "client-bound: cannot judge",
            Verdict::NotMeasured => "not measured",
        }
    }
}

/// One goal for one profile.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Goal {
    pub profile: String,
    pub goal: String,
    pub verdict: Verdict,
    /// The figures behind the verdict.
    pub detail: String,
}

impl Goal {
    pub fn line(&self) -> String {
        format!(
            "{}: {}: {} ({})",
            self.profile,
            self.goal,
            self.verdict.text(),
            self.detail
        )
    }
}

/// Every goal for every profile in `profiles`.
pub fn goals(profiles: &[String], rows: &[Row]) -> Vec<Goal> {
    let mut out = Vec::new();
    for p in profiles {
        let ours: Vec<&Row> = rows
            .iter()
            .filter(|r| &r.profile == p && r.who == Who::Firehose && r.tps.is_some())
            .collect();
        out.push(loss(p, &ours));
        if p == "latency" {
            out.push(tail(p, &ours));
        }
        out.push(peer(p, &ours, rows));
    }
    out
}

fn percents(rs: &[&Row]) -> String {
    rs.iter()
        .map(|r| format!("{}%", r.percent))
        .collect::<Vec<_>>()
        .join(", ")
}

fn loss(p: &str, ours: &[&Row]) -> Goal {
    let under: Vec<&Row> = ours
        .iter()
        .copied()
        .filter(|r| r.percent < LOSS_FREE_BELOW_PERCENT)
        .collect();
    let lost: Vec<String> = under
        .iter()
        .filter(|r| r.lost > 0)
        .map(|r| format!("{} at {}%", r.lost, r.percent))
        .collect();
    let bound: Vec<&Row> = under.iter().copied().filter(|r| client_bound(r)).collect();
    let (verdict, detail) = if under.is_empty() {
        (Verdict::NotMeasured, "no rate below 80% was run".into())
    } else if !lost.is_empty() {
        (
            Verdict::NotMet,
            format!("lost {} (over all repetitions)", lost.join(", ")),
        )
    } else if !bound.is_empty() {
        (
            Verdict::ClientBound,
            format!(
                "no loss, but the client did not keep the rate at {}",
                percents(&bound)
            ),
        )
    } else {
        (Verdict::Met, format!("no loss at {}", percents(&under)))
    };
    Goal {
        profile: p.into(),
        goal: "no loss below 80% of max tps".into(),
        verdict,
        detail,
    }
}

fn tail(p: &str, ours: &[&Row]) -> Goal {
    let goal = "rtt p99 at 50% of max <= 3x the unloaded rtt p50".to_string();
    let unloaded = ours
        .iter()
        .filter(|r| r.percent < TAIL_PERCENT)
        .min_by_key(|r| r.percent)
        .and_then(|r| Some((r.percent, r.rtt_p50_us?.median)));
    let at = ours.iter().find(|r| r.percent == TAIL_PERCENT);
    let (verdict, detail) = match (unloaded, at.and_then(|r| Some((r, r.rtt_p99_us?.median)))) {
        (Some((low, base)), Some((r, p99))) => {
            let x = p99 / base;
            let mut figures = format!(
                "rtt p99 {p99:.1} us at 50% against rtt p50 {base:.2} us at {low}% (the lowest rate run, as unloaded): {x:.1}x"
            );
            if let Some(w) = worker(r) {
                figures.push_str(&format!("; the server's worker at 50%: {w}"));
            }
            if client_bound(r) {
                (Verdict::ClientBound, figures)
            } else if x <= TAIL_FACTOR {
                (Verdict::Met, figures)
            } else {
                (Verdict::NotMet, figures)
            }
        }
        _ => (
            Verdict::NotMeasured,
            "needs a row at 50% and one below it, with kernel stamps".into(),
        ),
    };
    Goal {
        profile: p.into(),
        goal,
        verdict,
        detail,
    }
}

/// How the server's worker was scheduled in a row (medians), when it was read: what a
/// tail made of the server's pauses shows.
fn worker(r: &Row) -> Option<String> {
    Some(format!(
        "{:.0} sleeps/s, {:.0} preemptions/s, {:.0} us/s waiting on the run queue",
        r.server_sleeps_per_s?.median,
        r.server_preempted_per_s?.median,
        r.server_run_delay_us_per_s?.median
    ))
}

fn peer(p: &str, ours: &[&Row], rows: &[Row]) -> Goal {
    let (mut met, mut not, mut bound) = (Vec::new(), Vec::new(), Vec::new());
    for r in ours {
        let Some(t) = rows.iter().find(|t| {
            t.who == Who::Sockperf && t.profile == p && t.percent == r.percent && t.tps.is_some()
        }) else {
            continue;
        };
        let ratio = |a: Option<crate::stats::Summary>, b: Option<crate::stats::Summary>| {
            Some(a?.median / b.filter(|b| b.median > 0.0)?.median)
        };
        let (p50, p99) = (
            ratio(r.latency_p50_us, t.latency_p50_us),
            ratio(r.latency_p99_us, t.latency_p99_us),
        );
        if client_bound(r) || client_bound(t) {
            let who = if client_bound(r) {
                "firehose"
            } else {
                "sockperf"
            };
            bound.push(format!("{}% ({who})", r.percent));
        } else if let (Some(a), Some(b)) = (p50, p99) {
            let s = format!("{}% (p50 {a:.2}x, p99 {b:.2}x)", r.percent);
            if a <= PEER_RATIO && b <= PEER_RATIO {
                met.push(s);
            } else {
                not.push(s);
            }
        }
    }
    let mut parts = Vec::new();
    for (what, v) in [
        ("met at", &met),
        ("not met at", &not),
        ("client-bound at", &bound),
    ] {
        if !v.is_empty() {
            parts.push(format!("{what} {}", v.join(", ")));
        }
    }
    let verdict = if !not.is_empty() {
        Verdict::NotMet
    } else if !bound.is_empty() {
        Verdict::ClientBound
    } else if !met.is_empty() {
        Verdict::Met
    } else {
        Verdict::NotMeasured
    };
    Goal {
        profile: p.into(),
        goal: "latency p50 and p99 <= 0.8x sockperf's at each rate".into(),
        verdict,
        detail: if parts.is_empty() {
            "no rate with both sides measured".into()
        } else {
            parts.join("; ")
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::Summary;

    fn row(who: Who, percent: u32, tps: f64, lost: u64, p50: f64, p99: f64) -> Row {
        let s = |v: f64| Summary::of([v]);
        Row {
            profile: "latency".into(),
            who,
            percent,
            rate: 1000.0 * f64::from(percent),
            options: String::new(),
            sampling: String::new(),
            tps: s(tps),
            lost,
            latency_p50_us: s(p50),
            latency_p99_us: s(p99),
            latency_p999_us: None,
            rtt_p50_us: s(p50 / 2.0),
            rtt_p99_us: s(p99 / 2.0),
            rtt_p999_us: None,
            send_lag_p50_us: s(2.0),
            send_lag_p99_us: None,
            recv_lag_p99_us: None,
            server_sleeps_per_s: None,
            server_preempted_per_s: None,
            server_run_delay_us_per_s: None,
            client_bound: false,
            reason: None,
        }
    }

    fn verdicts(rows: &[Row]) -> Vec<(String, Verdict)> {
        goals(&["latency".into()], rows)
            .into_iter()
            .map(|g| (g.goal, g.verdict))
            .collect()
    }

    #[test]
    fn each_goal_is_met_or_not_from_the_rows() {
        let rows = vec![
            row(Who::Firehose, 10, 10_000.0, 0, 6.0, 20.0),
            row(Who::Sockperf, 10, 10_000.0, 0, 10.0, 30.0),
            row(Who::Firehose, 50, 50_000.0, 0, 7.0, 30.0),
            row(Who::Sockperf, 50, 50_000.0, 0, 10.0, 30.0),
        ];
        let v = verdicts(&rows);
        assert_eq!(v[0].1, Verdict::Met, "{v:?}");
        // rtt p99 15 at 50% over rtt p50 3 at 10%: 5x.
        assert_eq!(v[1].1, Verdict::NotMet, "{v:?}");
        // p99 30 against 30 at 50%: 1.0x.
        assert_eq!(v[2].1, Verdict::NotMet, "{v:?}");
        let g = goals(&["latency".into()], &rows);
        assert!(g[1].detail.ends_with("5.0x"), "{}", g[1].detail);
        // With the worker's scheduling read, the tail's verdict carries it.
        let mut watched = rows.clone();
        watched[2].server_sleeps_per_s = Summary::of([120.0]);
        watched[2].server_preempted_per_s = Summary::of([3.0]);
        watched[2].server_run_delay_us_per_s = Summary::of([450.0]);
        assert!(
            goals(&["latency".into()], &watched)[1].detail.ends_with(
                "5.0x; the server's worker at 50%: 120 sleeps/s, 3 preemptions/s, 450 us/s waiting on the run queue"
            ),
            "{}",
            goals(&["latency".into()], &watched)[1].detail
        );
        assert!(
            g[2].detail.contains("met at 10% (p50 0.60x, p99 0.67x)"),
            "{}",
            g[2].detail
        );

        let mut lossy = rows.clone();
        lossy[2].lost = 90;
        assert!(goals(&["latency".into()], &lossy)[0]
            .line()
            .contains("not met (lost 90 at 50%"));
    }

    #[test]
    fn a_row_whose_client_fell_behind_cannot_judge_the_server() {
        let mut rows = vec![
            row(Who::Firehose, 10, 10_000.0, 0, 6.0, 20.0),
            row(Who::Firehose, 50, 50_000.0, 0, 7.0, 30.0),
            row(Who::Sockperf, 50, 50_000.0, 0, 10.0, 100.0),
        ];
        assert!(!client_bound(&rows[1]));
        // A backlog: send_lag p50 of 20 ms.
        rows[1].send_lag_p50_us = Summary::of([20_000.0]);
        assert!(client_bound(&rows[1]));
        let v = verdicts(&rows);
        assert_eq!(v[0].1, Verdict::ClientBound, "{v:?}");
        assert_eq!(v[1].1, Verdict::ClientBound, "{v:?}");
        assert_eq!(v[2].1, Verdict::ClientBound, "{v:?}");
        // An offered rate short of the one asked, on either side.
        rows[1].send_lag_p50_us = Summary::of([2.0]);
        rows[2].tps = Summary::of([40_000.0]);
        assert!(client_bound(&rows[2]));
        let g = goals(&["latency".into()], &rows);
        assert_eq!(g[2].detail, "client-bound at 50% (sockperf)");
        // Nothing at 50%: the tail goal was not measured.
        assert_eq!(verdicts(&rows[..1])[1].1, Verdict::NotMeasured);
    }
}
