//! Medians with min-max over repetitions, gains between configurations, and verdicts that
//! refuse to call a difference inside the noise a gain.

use serde::Serialize;

/// Median, min and max of the repetitions of one figure.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Summary {
    pub median: f64,
    pub min: f64,
    pub max: f64,
    pub n: usize,
}

impl Summary {
    /// Summarises the finite values; `None` when there are none.
    pub fn of(values: impl IntoIterator<Item = f64>) -> Option<Summary> {
        let mut v: Vec<f64> = values.into_iter().filter(|x| x.is_finite()).collect();
        if v.is_empty() {
            return None;
        }
        v.sort_by(f64::total_cmp);
        let n = v.len();
        let median = if n % 2 == 1 {
            v[n / 2]
        } else {
            (v[n / 2 - 1] + v[n / 2]) / 2.0
        };
        Some(Summary {
            median,
            min: v[0],
            max: v[n - 1],
            n,
        })
    }

    /// (max - min) / median: how far repetitions of the same thing disagree.
    pub fn spread(&self) -> f64 {
        if self.median == 0.0 {
            0.0
        } else {
            (self.max - self.min) / self.median.abs()
        }
    }
}

/// Whether a step changed the figure beyond the noise.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Effect {
    Helped,
    Hurt,
    WithinNoise,
    /// First step, or nothing to compare with.
    Baseline,
}

impl Effect {
    pub fn name(self) -> &'static str {
        match self {
            Effect::Helped => "helped",
            Effect::Hurt => "hurt",
            Effect::WithinNoise => "within noise",
            Effect::Baseline => "baseline",
        }
    }
}

/// The smallest relative change ever called a gain: with few repetitions the observed
/// spread underestimates the noise of a shared host.
pub const NOISE_FLOOR: f64 = 0.05;

/// Ratio of medians `after / before`.
pub fn gain(before: &Summary, after: &Summary) -> Option<f64> {
    (before.median > 0.0).then(|| after.median / before.median)
}

/// Helped when the medians differ by more than the noise band (the larger spread of the
/// two, at least [`NOISE_FLOOR`]) in the good direction and the ranges do not overlap;
/// hurt likewise in the bad direction; otherwise within noise. `higher_is_better` is true
/// for tps and false for costs.
pub fn effect(before: &Summary, after: &Summary, higher_is_better: bool) -> Effect {
    let Some(g) = gain(before, after) else {
        return Effect::Baseline;
    };
    let band = before.spread().max(after.spread()).max(NOISE_FLOOR);
    let change = g - 1.0;
    let separated = after.min > before.max || after.max < before.min;
    if change.abs() <= band || !separated {
        return Effect::WithinNoise;
    }
    if (change > 0.0) == higher_is_better {
        Effect::Helped
    } else {
        Effect::Hurt
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: &[f64]) -> Summary {
        Summary::of(v.iter().copied()).unwrap()
    }

    #[test]
    fn median_and_range() {
        let x = s(&[3.0, 1.0, 2.0]);
        assert_eq!((x.median, x.min, x.max, x.n), (2.0, 1.0, 3.0, 3));
        assert_eq!(s(&[1.0, 4.0]).median, 2.5);
        assert!(Summary::of([f64::NAN]).is_none());
        assert!(Summary::of([]).is_none());
    }

    #[test]
    fn effects() {
        let base = s(&[100.0, 102.0, 98.0]);
        assert_eq!(
            effect(&base, &s(&[150.0, 149.0, 151.0]), true),
            Effect::Helped
        );
        assert_eq!(effect(&base, &s(&[50.0, 52.0, 48.0]), true), Effect::Hurt);
        assert_eq!(
            effect(&base, &s(&[103.0, 101.0, 104.0]), true),
            Effect::WithinNoise
        );
        // Overlapping ranges are noise even when the medians differ a lot.
        assert_eq!(
            effect(&base, &s(&[90.0, 130.0, 300.0]), true),
            Effect::WithinNoise
        );
        // For a cost, lower is better.
        assert_eq!(
            effect(&base, &s(&[50.0, 52.0, 48.0]), false),
            Effect::Helped
        );
        assert_eq!(effect(&s(&[0.0]), &base, true), Effect::Baseline);
        assert!((gain(&base, &s(&[150.0])).unwrap() - 1.5).abs() < 1e-12);
    }
}
