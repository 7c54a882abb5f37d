//! The stopping rule of `ab --rounds auto`: a group-sequential design. The A/B looks at its
//! runs a few times (after a quarter, half, three quarters and all of the rounds its time
//! allows, never before [`FIRST_LOOK`] rounds) and stops at the first look where every gated
//! metric is decided. Each look tests at the share of α that Lan-DeMets' Pocock-type spending
//! function α·ln(1 + (e − 1)·t) assigns to its part of the rounds; the shares add up to α,
//! so the chance of a false verdict over all the looks together is at most α (the union
//! bound, whatever the correlation of the looks). A look that ends the A/B early (its time
//! ran out, or a stop signal) spends what is left. Main thread.

use std::f64::consts::E;
use xrunlab_results::compare::{MetricComparison, Verdict};

/// Rounds before the first look: the paired t on fewer pairs has too few degrees of freedom
/// to decide anything at a look's small share of α.
pub const FIRST_LOOK: usize = 4;

/// Looks planned over the rounds the time allows.
pub const LOOKS: usize = 4;

/// The α spent by information fraction `t` (0..=1): Lan-DeMets' Pocock-type function, which
/// spends more early than O'Brien-Fleming's, so a large effect stops the A/B at its first look.
pub fn pocock_spent(alpha: f64, t: f64) -> f64 {
    alpha * (1.0 + (E - 1.0) * t.clamp(0.0, 1.0)).ln()
}

/// The looks of one A/B and the α spent so far.
#[derive(Debug, Clone, PartialEq)]
pub struct Looks {
    alpha: f64,
    max_rounds: usize,
    rounds: Vec<usize>,
    spent: f64,
}

impl Looks {
    /// The looks for at most `max_rounds` rounds and an overall `alpha`; `None` when
    /// `max_rounds` is below [`FIRST_LOOK`].
    pub fn new(max_rounds: usize, alpha: f64) -> Option<Looks> {
        if max_rounds < FIRST_LOOK {
            return None;
        }
        let mut rounds: Vec<usize> = (1..=LOOKS)
            .map(|k| (max_rounds * k).div_ceil(LOOKS).max(FIRST_LOOK))
            .collect();
        rounds.dedup();
        Some(Looks {
            alpha,
            max_rounds,
            rounds,
            spent: 0.0,
        })
    }

    /// The rounds at which the A/B looks.
    pub fn rounds(&self) -> &[usize] {
        &self.rounds
    }

    /// The most rounds.
    pub fn max_rounds(&self) -> usize {
        self.max_rounds
    }

    /// After `round`: the α to test at when it is a look (and that share is spent), else
    /// `None`. The last look gets all that is left.
    pub fn look(&mut self, round: usize) -> Option<f64> {
        if !self.rounds.contains(&round) {
            return None;
        }
        let share = if round >= self.max_rounds {
            self.alpha - self.spent
        } else {
            pocock_spent(self.alpha, round as f64 / self.max_rounds as f64) - self.spent
        };
        self.spent += share;
        Some(share)
    }

    /// The α left for a final test when the A/B ends between looks (its time ran out, or a
    /// stop signal), spent by this call.
    pub fn rest(&mut self) -> f64 {
        let left = (self.alpha - self.spent).max(0.0);
        self.spent = self.alpha;
        left
    }
}

/// Every gated metric decided (better, worse, or no change beyond the margin), and there is
/// one: the A/B may stop.
pub fn all_decided(metrics: &[MetricComparison]) -> bool {
    let mut gated = metrics.iter().filter(|m| m.gated).peekable();
    gated.peek().is_some()
        && gated.all(|m| {
            matches!(
                m.verdict,
                Verdict::Better | Verdict::Worse | Verdict::NoDifference
            )
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_looks_spend_alpha_and_no_more() {
        let mut l = Looks::new(24, 0.05).unwrap();
        assert_eq!(l.rounds(), [6, 12, 18, 24]);
        assert_eq!(l.look(5), None);
        let shares: Vec<f64> = [6, 12, 18, 24].map(|r| l.look(r).unwrap()).to_vec();
        // Pocock's spending at t = 1/4: 0.05·ln(1.4296) = 0.01787.
        assert!((shares[0] - 0.017_87).abs() < 1e-4, "{shares:?}");
        assert!(shares.windows(2).all(|w| w[1] < w[0]), "{shares:?}");
        assert!((shares.iter().sum::<f64>() - 0.05).abs() < 1e-12);
        assert_eq!(l.rest(), 0.0);
        // Few rounds: the first look waits for FIRST_LOOK, looks that fall together are one.
        assert_eq!(Looks::new(6, 0.05).unwrap().rounds(), [4, 5, 6]);
        assert_eq!(Looks::new(3, 0.05), None);
        // Ended between looks: the rest is what the looks so far left.
        let mut l = Looks::new(40, 0.05).unwrap();
        let first = l.look(10).unwrap();
        assert!((l.rest() - (0.05 - first)).abs() < 1e-12);
    }
}
