//! The max tps the curve's percents are of: the highest open-loop rate a profile sustains
//! under the curve's own arrivals (the same `load --rate R --stamps --flows F --size S
//! --spin`), found in a bounded number of runs.
//!
//! The closed-loop max (4 flows x window 32) keeps 128 requests outstanding and the server
//! reads full batches; a spinning client's one-by-one arrivals cost it more per request, and
//! session 8's `latency` profile lost requests at 70% and 80% of its closed-loop max. So:
//! the first step offers the closed-loop max; each step that does not hold offers
//! [`FACTOR`] of the step before; after the first step that holds, [`REFINE`] bisections
//! between it and the lowest rate that did not; never more than [`MAX_STEPS`] steps. The
//! search never offers more than the closed-loop max. The max is the highest rate held.

use super::goals::kept_rate;
use serde::Serialize;

/// Each step that did not hold offers this share of the one before.
pub const FACTOR: f64 = 0.8;
/// Bisections after the first step that held: the max is then within (1/FACTOR - 1) / 2^2
/// (about 6%) of the lowest rate that did not hold.
pub const REFINE: usize = 2;
/// Steps at most, refinements included: down to FACTOR^7 (21%) of the closed-loop max.
pub const MAX_STEPS: usize = 8;

/// How one step went.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum StepOutcome {
    /// No loss, and the generator kept the rate.
    Held,
    /// The generator kept the rate and requests were lost: the server did not sustain it.
    Lost,
    /// The generator did not keep the rate ([`kept_rate`]): the step says nothing of the
    /// server.
    ClientBound,
}

/// One step: the rate offered and what came of it.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Step {
    /// Requests per second asked for.
    pub rate: f64,
    /// Requests per second sent over the measured window.
    pub tps: f64,
    pub lost: u64,
    /// The generator's send_lag p50 (from the kernel's departure stamps), when stamped.
    pub send_lag_p50_us: Option<f64>,
    pub outcome: StepOutcome,
}

impl Step {
    pub fn new(rate: f64, tps: f64, lost: u64, send_lag_p50_us: Option<f64>) -> Step {
        let outcome = if !kept_rate(rate, tps, send_lag_p50_us) {
            StepOutcome::ClientBound
        } else if lost > 0 {
            StepOutcome::Lost
        } else {
            StepOutcome::Held
        };
        Step {
            rate,
            tps,
            lost,
            send_lag_p50_us,
            outcome,
        }
    }
}

/// A profile's two maxima and the steps that found the second.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MaxTps {
    /// Closed loop, 4 flows x window 32: the server reading full batches.
    pub closed_loop_tps: f64,
    /// The highest rate held under the curve's own arrivals: the percents are of it.
    /// `None`: no step held, and the profile has no curve.
    pub open_loop_tps: Option<f64>,
    /// The lowest rate that did not hold was client-bound: the server's own max may be
    /// higher, and the goals read against this one cannot be judged.
    pub lower_bound: bool,
    pub steps: Vec<Step>,
}

impl MaxTps {
    /// Why there is no open-loop max, when there is none.
    pub fn none_held(&self) -> Option<String> {
        if self.open_loop_tps.is_some() {
            return None;
        }
        Some(format!(
            "no open-loop rate held in {} steps down from the closed-loop max {}{}",
            self.steps.len(),
            crate::report::thousands(self.closed_loop_tps),
            if self.all_client_bound() {
                ", every one client-bound"
            } else {
                ""
            }
        ))
    }

    /// Every step was client-bound: the search says nothing of the server.
    pub fn all_client_bound(&self) -> bool {
        !self.steps.is_empty()
            && self
                .steps
                .iter()
                .all(|s| s.outcome == StepOutcome::ClientBound)
    }
}

/// What the search does next, from the closed-loop max and the steps so far.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Next {
    /// Offer this rate.
    Try(f64),
    /// The max: the highest rate held. `lower_bound`: the lowest rate that did not hold was
    /// client-bound, so the server's own max may be higher.
    Found { tps: f64, lower_bound: bool },
    /// No step held in [`MAX_STEPS`].
    NotFound,
}

/// The search as a function of its steps (see the module doc).
pub fn next(closed_loop: f64, steps: &[Step]) -> Next {
    let Some(last) = steps.last() else {
        return Next::Try(closed_loop.round().max(1.0));
    };
    let Some(first_held) = steps.iter().position(|s| s.outcome == StepOutcome::Held) else {
        if steps.len() >= MAX_STEPS {
            return Next::NotFound;
        }
        return Next::Try((last.rate * FACTOR).round().max(1.0));
    };
    let lo = steps
        .iter()
        .filter(|s| s.outcome == StepOutcome::Held)
        .map(|s| s.rate)
        .fold(0.0, f64::max);
    let hi = steps
        .iter()
        .filter(|s| s.outcome != StepOutcome::Held && s.rate > lo)
        .min_by(|a, b| a.rate.total_cmp(&b.rate));
    let Some(hi) = hi else {
        return Next::Found {
            tps: lo,
            lower_bound: false,
        };
    };
    let refined = steps.len() - 1 - first_held;
    let mid = ((lo + hi.rate) / 2.0).round();
    if refined >= REFINE || steps.len() >= MAX_STEPS || mid <= lo || mid >= hi.rate {
        return Next::Found {
            tps: lo,
            lower_bound: hi.outcome == StepOutcome::ClientBound,
        };
    }
    Next::Try(mid)
}

/// The steps as one line, in the order run: "221,116 lost 41,319, 176,893 held, ...".
pub fn steps_line(steps: &[Step]) -> String {
    steps
        .iter()
        .map(|s| match s.outcome {
            StepOutcome::Lost => format!(
                "{} lost {}",
                crate::report::thousands(s.rate),
                crate::report::thousands(s.lost as f64)
            ),
            StepOutcome::ClientBound => format!(
                "{} client-bound (sent {}/s)",
                crate::report::thousands(s.rate),
                crate::report::thousands(s.tps)
            ),
            StepOutcome::Held => format!("{} held", crate::report::thousands(s.rate)),
        })
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs the search against a fake server and client: a step at `rate` loses above
    /// `server`, and the client sends at most `client` per second.
    fn search(closed: f64, server: f64, client: f64) -> (Vec<Step>, Next) {
        let mut steps = Vec::new();
        loop {
            match next(closed, &steps) {
                Next::Try(rate) => {
                    let tps = rate.min(client);
                    let lost = if tps > server { 1000 } else { 0 };
                    steps.push(Step::new(rate, tps, lost, Some(2.0)));
                    assert!(steps.len() <= MAX_STEPS, "{steps:?}");
                }
                done => return (steps, done),
            }
        }
    }

    fn rates(steps: &[Step]) -> Vec<f64> {
        steps.iter().map(|s| s.rate).collect()
    }

    #[test]
    fn a_step_is_held_lost_or_client_bound() {
        assert_eq!(
            Step::new(1000.0, 1000.0, 0, Some(3.0)).outcome,
            StepOutcome::Held
        );
        assert_eq!(
            Step::new(1000.0, 990.0, 1, Some(3.0)).outcome,
            StepOutcome::Lost
        );
        // Sent under 95% of the rate, or a backlog (send_lag p50 over 100 us): the client.
        assert_eq!(
            Step::new(1000.0, 900.0, 0, Some(3.0)).outcome,
            StepOutcome::ClientBound
        );
        assert_eq!(
            Step::new(1000.0, 1000.0, 5, Some(500.0)).outcome,
            StepOutcome::ClientBound
        );
        assert_eq!(
            Step::new(1000.0, 1000.0, 0, None).outcome,
            StepOutcome::Held
        );
    }

    #[test]
    fn the_closed_loop_max_held_is_the_max() {
        let (steps, done) = search(200_000.0, 250_000.0, 1e9);
        assert_eq!(rates(&steps), [200_000.0]);
        assert_eq!(
            done,
            Next::Found {
                tps: 200_000.0,
                lower_bound: false
            }
        );
    }

    #[test]
    fn it_steps_down_then_bisects_twice() {
        // Session 8's latency profile: 221k closed loop, losing at 70% of it.
        let (steps, done) = search(221_116.0, 150_000.0, 1e9);
        // 221,116 lost; 176,893 lost; 141,514 held; 159,204 lost; 150,359 lost.
        assert_eq!(
            rates(&steps),
            [221_116.0, 176_893.0, 141_514.0, 159_204.0, 150_359.0]
        );
        assert_eq!(
            steps.iter().map(|s| s.outcome).collect::<Vec<_>>(),
            [
                StepOutcome::Lost,
                StepOutcome::Lost,
                StepOutcome::Held,
                StepOutcome::Lost,
                StepOutcome::Lost
            ]
        );
        assert_eq!(
            done,
            Next::Found {
                tps: 141_514.0,
                lower_bound: false
            }
        );
        // A refinement that holds raises the max.
        let (steps, done) = search(221_116.0, 160_000.0, 1e9);
        assert_eq!(
            rates(&steps),
            [221_116.0, 176_893.0, 141_514.0, 159_204.0, 168_049.0]
        );
        assert_eq!(
            done,
            Next::Found {
                tps: 159_204.0,
                lower_bound: false
            }
        );
    }

    #[test]
    fn a_client_bound_step_above_the_max_makes_it_a_lower_bound() {
        // The client sends 150k at most, the server would take 200k: 221,116 and 176,893
        // client-bound, 141,514 held, 159,204 client-bound, 150,359 held (sent 150,000).
        let (steps, done) = search(221_116.0, 200_000.0, 150_000.0);
        assert_eq!(
            steps.iter().map(|s| s.outcome).collect::<Vec<_>>(),
            [
                StepOutcome::ClientBound,
                StepOutcome::ClientBound,
                StepOutcome::Held,
                StepOutcome::ClientBound,
                StepOutcome::Held
            ]
        );
        assert_eq!(
            done,
            Next::Found {
                tps: 150_359.0,
                lower_bound: true
            }
        );
        // A loss with the rate kept below the client-bound step brackets the server's max.
        let (_, done) = search(221_116.0, 145_000.0, 170_000.0);
        assert_eq!(
            done,
            Next::Found {
                tps: 141_514.0,
                lower_bound: false
            }
        );
    }

    #[test]
    fn nothing_held_in_the_steps_is_not_found() {
        let (steps, done) = search(100_000.0, 10.0, 1e9);
        assert_eq!(steps.len(), MAX_STEPS);
        assert_eq!(done, Next::NotFound);
        assert!(steps.iter().all(|s| s.outcome == StepOutcome::Lost));
        // Each step 0.8 of the one before: the last at 0.8^7 of the first.
        assert_eq!(steps[MAX_STEPS - 1].rate, 20_971.0);
    }

    #[test]
    fn the_steps_read_as_one_line() {
        let steps = [
            Step::new(200_000.0, 200_000.0, 41_319, Some(3.0)),
            Step::new(160_000.0, 120_000.0, 0, Some(3.0)),
            Step::new(128_000.0, 128_000.0, 0, Some(3.0)),
        ];
        assert_eq!(
            steps_line(&steps),
            "200,000 lost 41,319, 160,000 client-bound (sent 120,000/s), 128,000 held"
        );
    }
}
