//! Which of watch's cards belong to which of the culprit's induced stalls, in `bench watch`'s
//! client mode (main thread). The culprit's run file dates its stalls in seconds from its own
//! start; watch dates each card's cycle on CLOCK_MONOTONIC. Neither names the other's clock, so
//! the two are put on one clock by the offset that puts the most stalls on a card.
//!
//! Why: a loaded machine makes xruns of its own (a compiler's burst delays the bystander too),
//! and watch is right to card them. Counted against the culprit, those true cards read as
//! watch's mistakes (one run gave 23 cards for 19 stalls, "right" 91 %, when every stall's card
//! named the culprit). Matched to the stalls, the right share is watch's accuracy on the xruns
//! whose cause is known, and the other cards are counted as what they are.

/// How close a card's cycle must start to a stall's aligned time to score the alignment, ns:
/// the stall begins inside the culprit's callback, so its card is that cycle (or the next), a
/// period or two at most at the bench's buffer sizes.
const ALIGN_NS: i64 = 6_000_000;
/// A card belongs to a stall when its cycle starts from this long before the stall's aligned
/// time...
const BEFORE_NS: i64 = 10_000_000;
/// ... to this long after it (the 12 ms stall and the cycle that catches up).
const AFTER_NS: i64 = 30_000_000;

/// The cards matched to stalls.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Matched {
    /// For each card (in the order given), the stall it belongs to.
    pub(super) stall_of_card: Vec<Option<usize>>,
    /// For each stall, whether any card belongs to it.
    pub(super) stall_has_card: Vec<bool>,
}

/// Matches cards (their cycles' starts, CLOCK_MONOTONIC ns) to stalls (seconds on the
/// culprit's clock). With no card or no stall nothing matches.
pub(super) fn match_cards(stalls_s: &[f64], cards_ns: &[u64]) -> Matched {
    let stalls: Vec<i64> = stalls_s.iter().map(|s| (s * 1e9) as i64).collect();
    let cards: Vec<i64> = cards_ns
        .iter()
        .map(|&c| i64::try_from(c).unwrap_or(i64::MAX))
        .collect();
    let score = |offset: i64| {
        stalls
            .iter()
            .filter(|&&s| cards.iter().any(|&c| (c - (s + offset)).abs() <= ALIGN_NS))
            .count()
    };
    // Every (card, stall) pair proposes the offset that puts one on the other; the best one puts
    // the most stalls on a card (ties: the earliest card with the earliest stall, for a result
    // that does not depend on float order).
    let best = cards
        .iter()
        .flat_map(|&c| stalls.iter().map(move |&s| c - s))
        .map(|o| (score(o), o))
        .fold(None::<(usize, i64)>, |best, (n, o)| match best {
            Some((m, _)) if m >= n => best,
            _ => Some((n, o)),
        });
    let Some((_, offset)) = best else {
        return Matched {
            stall_of_card: vec![None; cards.len()],
            stall_has_card: vec![false; stalls.len()],
        };
    };
    let stall_of_card: Vec<Option<usize>> = cards
        .iter()
        .map(|&c| {
            stalls.iter().position(|&s| {
                let t = s + offset;
                c >= t - BEFORE_NS && c <= t + AFTER_NS
            })
        })
        .collect();
    let stall_has_card = (0..stalls.len())
        .map(|i| stall_of_card.contains(&Some(i)))
        .collect();
    Matched {
        stall_of_card,
        stall_has_card,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    #[test]
    fn cards_of_stalls_and_cards_of_other_xruns_are_told_apart() {
        // Stalls every 500 ms from 0.5 s on the culprit's clock; watch's clock is 2560 s on and
        // each stall's card starts 1.2 ms before the stall's own stamp.
        let stalls: Vec<f64> = (1..=6).map(|k| 0.5 * k as f64).collect();
        let on = |s: f64| (2_560_000 + (s * 1000.0) as u64) * MS - 1_200_000;
        let mut cards: Vec<u64> = stalls.iter().map(|&s| on(s)).collect();
        // A second card for the 3rd stall (the cycle after), one from the machine between
        // stalls, and one before the first.
        cards.push(on(1.5) + 2_667_000);
        cards.push(on(1.5) + 240 * MS);
        cards.push(on(0.5) - 300 * MS);
        // One stall without a card: its card is taken out.
        cards.remove(4);
        let m = match_cards(&stalls, &cards);
        assert_eq!(
            m.stall_of_card,
            vec![
                Some(0),
                Some(1),
                Some(2),
                Some(3),
                Some(5),
                Some(2),
                None,
                None
            ]
        );
        assert_eq!(m.stall_has_card, vec![true, true, true, true, false, true]);
    }

    #[test]
    fn nothing_to_match_matches_nothing() {
        assert_eq!(
            match_cards(&[0.5, 1.0], &[]),
            Matched {
                stall_of_card: vec![],
                stall_has_card: vec![false, false]
            }
        );
        assert_eq!(
            match_cards(&[], &[5 * MS]),
            Matched {
                stall_of_card: vec![None],
                stall_has_card: vec![]
            }
        );
    }
}
