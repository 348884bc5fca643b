//! Issue 25's curve goals, judged from the rows, so a run's summary says for each one
//! whether it was met, not met, or cannot be judged because the generator (not the server)
//! set the figures.

use super::search::MaxTps;
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

/// The goals as the summary names them.
const LOSS: &str = "no loss below 80% of max tps";
const TAIL: &str = "rtt p99 at 50% of max <= 3x the unloaded rtt p50";
const PEER: &str = "latency p50 and p99 <= 0.8x sockperf's at each rate";

/// Whether a generator asked for `rate` kept it: it sent (`tps`, requests sent per second,
/// not completed) at least 95% of it, and (ours,
/// from the kernel's departure stamps) its send_lag p50 stayed at or under 100 us.
pub fn kept_rate(rate: f64, tps: f64, send_lag_p50_us: Option<f64>) -> bool {
    tps >= OFFERED_SHARE * rate && send_lag_p50_us.is_none_or(|s| s <= BACKLOG_SEND_LAG_P50_US)
}

/// A row whose client could not keep the rate ([`kept_rate`], on the medians): its latency
/// describes the client, not the server. The unloaded point has no rate to keep.
pub fn client_bound(r: &Row) -> bool {
    if r.unloaded {
        return false;
    }
    let Some(tps) = r.tps else {
        return false;
    };
    !kept_rate(r.rate, tps.median, r.send_lag_p50_us.map(|s| s.median))
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

/// Every goal for every profile in `profiles`, read against each profile's max in `max`.
pub fn goals(
    profiles: &[String],
    max: &[(String, Result<MaxTps, String>)],
    rows: &[Row],
) -> Vec<Goal> {
    let mut out = Vec::new();
    for p in profiles {
        let ours: Vec<&Row> = rows
            .iter()
            .filter(|r| &r.profile == p && r.who == Who::Firehose && r.tps.is_some())
            .collect();
        let m = max
            .iter()
            .find(|(q, _)| q == p)
            .and_then(|(_, m)| m.as_ref().ok());
        // No open-loop max, no curve: every goal says why, and when every step of the
        // search was client-bound it is the client that could not judge.
        if let Some(why) = m.and_then(MaxTps::none_held) {
            let verdict = if m.is_some_and(MaxTps::all_client_bound) {
                Verdict::ClientBound
            } else {
                Verdict::NotMeasured
            };
            for goal in [LOSS, TAIL, PEER] {
                if goal != TAIL || p == "latency" {
                    out.push(Goal {
                        profile: p.clone(),
                        goal: goal.into(),
                        verdict,
                        detail: why.clone(),
                    });
                }
            }
            continue;
        }
        let curve: Vec<&Row> = ours.iter().copied().filter(|r| !r.unloaded).collect();
        let unloaded = ours.iter().copied().find(|r| r.unloaded);
        // A max that is a lower bound of the server's: the rates its percents name may be
        // below the ones the goals mean.
        let lower = m.filter(|m| m.lower_bound).map(|m| {
            format!(
                "the open-loop max {} is a lower bound: the rate above it was client-bound",
                crate::report::thousands(m.open_loop_tps.unwrap_or_default())
            )
        });
        out.push(loss(p, &curve, lower.as_deref()));
        if p == "latency" {
            out.push(tail(p, &curve, unloaded, lower.as_deref()));
        }
        out.push(peer(p, &curve, rows));
    }
    out
}

fn percents(rs: &[&Row]) -> String {
    rs.iter()
        .map(|r| format!("{}%", r.percent))
        .collect::<Vec<_>>()
        .join(", ")
}

fn loss(p: &str, ours: &[&Row], lower: Option<&str>) -> Goal {
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
    // A loss below 80% of a lower bound is below 80% of the server's max too; no loss
    // there leaves the rates between the two unrun.
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
    } else if let Some(why) = lower {
        (
            Verdict::ClientBound,
            format!("no loss at {}, but {why}", percents(&under)),
        )
    } else {
        (Verdict::Met, format!("no loss at {}", percents(&under)))
    };
    Goal {
        profile: p.into(),
        goal: LOSS.into(),
        verdict,
        detail,
    }
}

fn tail(p: &str, ours: &[&Row], unloaded: Option<&Row>, lower: Option<&str>) -> Goal {
    let goal = TAIL.to_string();
    let base = unloaded.and_then(|r| r.rtt_p50_us).map(|s| s.median);
    let at = ours.iter().find(|r| r.percent == TAIL_PERCENT);
    let (verdict, detail) = match (base, at.and_then(|r| Some((r, r.rtt_p99_us?.median)))) {
        (Some(base), Some((r, p99))) => {
            let x = p99 / base;
            let mut figures = format!(
                "rtt p99 {p99:.1} us at 50% against the unloaded rtt p50 {base:.2} us (1 flow, window 1): {x:.1}x"
            );
            if let Some(w) = worker(r) {
                figures.push_str(&format!("; the server's worker at 50%: {w}"));
            }
            if client_bound(r) {
                (Verdict::ClientBound, figures)
            } else if let Some(why) = lower {
                (Verdict::ClientBound, format!("{figures}; {why}"))
            } else if x <= TAIL_FACTOR {
                (Verdict::Met, figures)
            } else {
                (Verdict::NotMet, figures)
            }
        }
        _ => (
            Verdict::NotMeasured,
            "needs the unloaded point and a row at 50%, with kernel stamps".into(),
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
        goal: PEER.into(),
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
            unloaded: false,
            client_bound: false,
            reason: None,
        }
    }

    /// The unloaded point: one request outstanding, rtt p50 `p50 / 2`.
    fn unloaded(p50: f64, p99: f64) -> Row {
        Row {
            percent: 0,
            rate: 0.0,
            unloaded: true,
            // Closed loop sends as fast as replies come: no rate to keep.
            send_lag_p50_us: Summary::of([500.0]),
            ..row(Who::Firehose, 0, 20_000.0, 0, p50, p99)
        }
    }

    fn verdicts(rows: &[Row]) -> Vec<(String, Verdict)> {
        goals(&["latency".into()], &[], rows)
            .into_iter()
            .map(|g| (g.goal, g.verdict))
            .collect()
    }

    #[test]
    fn each_goal_is_met_or_not_from_the_rows() {
        let rows = vec![
            unloaded(6.0, 20.0),
            row(Who::Firehose, 10, 10_000.0, 0, 6.0, 20.0),
            row(Who::Sockperf, 10, 10_000.0, 0, 10.0, 30.0),
            row(Who::Firehose, 50, 50_000.0, 0, 7.0, 30.0),
            row(Who::Sockperf, 50, 50_000.0, 0, 10.0, 30.0),
        ];
        let v = verdicts(&rows);
        assert_eq!(v[0].1, Verdict::Met, "{v:?}");
        // rtt p99 15 at 50% over the unloaded rtt p50 3: 5x.
        assert_eq!(v[1].1, Verdict::NotMet, "{v:?}");
        // p99 30 against 30 at 50%: 1.0x.
        assert_eq!(v[2].1, Verdict::NotMet, "{v:?}");
        let g = goals(&["latency".into()], &[], &rows);
        assert_eq!(
            g[1].detail,
            "rtt p99 15.0 us at 50% against the unloaded rtt p50 3.00 us (1 flow, window 1): 5.0x"
        );
        // The unloaded point, not the lowest rate, is the base.
        let mut base = rows.clone();
        base[0].rtt_p50_us = Summary::of([6.0]);
        assert!(goals(&["latency".into()], &[], &base)[1]
            .detail
            .ends_with("rtt p50 6.00 us (1 flow, window 1): 2.5x"));
        assert_eq!(verdicts(&base)[1].1, Verdict::Met);
        // Without it the tail goal is not measured, and its loss is not the curve's.
        assert_eq!(verdicts(&rows[1..])[1].1, Verdict::NotMeasured);
        base[0].lost = 3;
        assert_eq!(verdicts(&base)[0].1, Verdict::Met);
        // With the worker's scheduling read, the tail's verdict carries it.
        let mut watched = rows.clone();
        watched[3].server_sleeps_per_s = Summary::of([120.0]);
        watched[3].server_preempted_per_s = Summary::of([3.0]);
        watched[3].server_run_delay_us_per_s = Summary::of([450.0]);
        assert!(
            goals(&["latency".into()], &[], &watched)[1].detail.ends_with(
                "5.0x; the server's worker at 50%: 120 sleeps/s, 3 preemptions/s, 450 us/s waiting on the run queue"
            ),
            "{}",
            goals(&["latency".into()], &[], &watched)[1].detail
        );
        assert!(
            g[2].detail.contains("met at 10% (p50 0.60x, p99 0.67x)"),
            "{}",
            g[2].detail
        );

        let mut lossy = rows.clone();
        lossy[3].lost = 90;
        assert!(goals(&["latency".into()], &[], &lossy)[0]
            .line()
            .contains("not met (lost 90 at 50%"));
    }

    #[test]
    fn a_row_whose_client_fell_behind_cannot_judge_the_server() {
        let mut rows = vec![
            row(Who::Firehose, 10, 10_000.0, 0, 6.0, 20.0),
            row(Who::Firehose, 50, 50_000.0, 0, 7.0, 30.0),
            row(Who::Sockperf, 50, 50_000.0, 0, 10.0, 100.0),
            unloaded(6.0, 20.0),
        ];
        assert!(!client_bound(&rows[1]));
        // The unloaded point has no rate to keep, whatever its send_lag.
        assert!(!client_bound(&rows[3]));
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
        let g = goals(&["latency".into()], &[], &rows);
        assert_eq!(g[2].detail, "client-bound at 50% (sockperf)");
        // Nothing at 50%: the tail goal was not measured.
        assert_eq!(verdicts(&rows[..1])[1].1, Verdict::NotMeasured);
    }

    #[test]
    fn a_max_that_is_a_lower_bound_cannot_judge_the_goals_read_against_it() {
        let rows = vec![
            unloaded(6.0, 20.0),
            row(Who::Firehose, 10, 10_000.0, 0, 6.0, 20.0),
            row(Who::Firehose, 50, 50_000.0, 0, 7.0, 16.0),
        ];
        let max = |lower_bound| {
            vec![(
                "latency".to_string(),
                Ok(MaxTps {
                    closed_loop_tps: 200_000.0,
                    open_loop_tps: Some(100_000.0),
                    lower_bound,
                    steps: Vec::new(),
                }),
            )]
        };
        let g = goals(&["latency".into()], &max(false), &rows);
        assert_eq!((g[0].verdict, g[1].verdict), (Verdict::Met, Verdict::Met));
        let g = goals(&["latency".into()], &max(true), &rows);
        assert_eq!(g[0].verdict, Verdict::ClientBound);
        assert_eq!(
            g[0].line(),
            "latency: no loss below 80% of max tps: client-bound: cannot judge (no loss at 10%, 50%, but the open-loop max 100,000 is a lower bound: the rate above it was client-bound)"
        );
        assert_eq!(g[1].verdict, Verdict::ClientBound);
        assert!(g[1]
            .detail
            .ends_with("is a lower bound: the rate above it was client-bound"));
        // A loss below 80% of a lower bound is below 80% of the server's max too.
        let mut lossy = rows.clone();
        lossy[1].lost = 7;
        let g = goals(&["latency".into()], &max(true), &lossy);
        assert_eq!(g[0].verdict, Verdict::NotMet);
        // Another profile's lower bound is not this one's.
        let mut other = max(true);
        other[0].0 = "tuned".into();
        assert_eq!(
            goals(&["latency".into()], &other, &rows)[0].verdict,
            Verdict::Met
        );
    }

    #[test]
    fn a_profile_without_an_open_loop_max_says_why_in_every_goal() {
        let step = |rate: f64, sent: f64, lost| {
            crate::studies::latency::Step::new(rate, sent, lost, Some(2.0))
        };
        let mut none = MaxTps {
            closed_loop_tps: 100_000.0,
            open_loop_tps: None,
            lower_bound: false,
            steps: vec![step(100_000.0, 60_000.0, 0), step(80_000.0, 50_000.0, 0)],
        };
        let max = |m: &MaxTps| vec![("latency".to_string(), Ok(m.clone()))];
        let g = goals(&["latency".into()], &max(&none), &[]);
        assert_eq!(g.len(), 3);
        assert!(g.iter().all(|g| g.verdict == Verdict::ClientBound), "{g:?}");
        assert_eq!(
            g[0].line(),
            "latency: no loss below 80% of max tps: client-bound: cannot judge (no open-loop rate held in 2 steps down from the closed-loop max 100,000, every one client-bound)"
        );
        // A step that lost with the rate kept: the server did not hold it, nothing to judge.
        none.steps[1] = step(80_000.0, 80_000.0, 9);
        let g = goals(&["latency".into()], &max(&none), &[]);
        assert!(g.iter().all(|g| g.verdict == Verdict::NotMeasured), "{g:?}");
        assert!(g[1].detail.ends_with("max 100,000"), "{}", g[1].detail);
        // Only the latency profile has the tail goal.
        let tuned = vec![("tuned".to_string(), Ok(none.clone()))];
        assert_eq!(goals(&["tuned".into()], &tuned, &[]).len(), 2);
    }
}
