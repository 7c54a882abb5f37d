//! The slowdown after wrong tokens: each client address gets [`FREE_TRIES`] wrong tokens in a
//! row, then every request from it is refused (429) for a pause that doubles with each further
//! wrong token, up to [`LONGEST_PAUSE`]; a right token ends it. Used by the token check on the
//! server's tokio threads (a mutex held for one map lookup, never across an await).
//!
//! A generated token (192 random bits) cannot be guessed anyway; this makes a short chosen one
//! (`--token`, at least 16 characters) cost a guesser hours per million tries instead of
//! seconds. During a pause the token is not even looked at, so many connections at once gain a
//! guesser nothing. The price: a page at the same address (on 127.0.0.1, every local user) is
//! refused too until the pause ends, and the 429 says so.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Wrong tokens in a row from one address before the pauses begin.
pub(crate) const FREE_TRIES: u32 = 10;
/// The first pause; each further wrong token doubles it.
const FIRST_PAUSE: Duration = Duration::from_secs(1);
/// The longest pause.
pub(crate) const LONGEST_PAUSE: Duration = Duration::from_secs(60);
/// Addresses remembered at most: past this, those not paused are forgotten first, so a flood
/// from many addresses cannot grow the map without bound.
const MAX_ADDRESSES: usize = 4096;

#[derive(Debug, Default, Clone, Copy)]
struct Strikes {
    /// Wrong tokens in a row.
    wrong: u32,
    /// Refused until then.
    until: Option<Instant>,
}

/// Wrong tokens per client address.
#[derive(Debug, Default)]
pub(crate) struct Backoff {
    clients: Mutex<HashMap<IpAddr, Strikes>>,
}

impl Backoff {
    fn clients(&self) -> std::sync::MutexGuard<'_, HashMap<IpAddr, Strikes>> {
        // A panic while holding it left a plain map behind: still usable.
        self.clients.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// How much longer `ip` is refused, if it is.
    pub(crate) fn paused(&self, ip: IpAddr, now: Instant) -> Option<Duration> {
        let until = self.clients().get(&ip)?.until?;
        (until > now).then(|| until - now)
    }

    /// Records a wrong token from `ip`; the pause it starts, if any.
    pub(crate) fn wrong(&self, ip: IpAddr, now: Instant) -> Option<Duration> {
        let mut clients = self.clients();
        if clients.len() >= MAX_ADDRESSES && !clients.contains_key(&ip) {
            clients.retain(|_, s| s.until.is_some_and(|u| u > now));
            if clients.len() >= MAX_ADDRESSES {
                // All paused: the newcomer is not remembered (it is not paused either).
                return None;
            }
        }
        let s = clients.entry(ip).or_default();
        s.wrong = s.wrong.saturating_add(1);
        let over = s.wrong.checked_sub(FREE_TRIES)?;
        let pause = FIRST_PAUSE
            .saturating_mul(1u32 << over.min(16))
            .min(LONGEST_PAUSE);
        s.until = Some(now + pause);
        Some(pause)
    }

    /// A right token from `ip`: its count starts again.
    pub(crate) fn right(&self, ip: IpAddr) {
        self.clients().remove(&ip);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pauses_start_after_the_free_tries_double_and_end_with_a_right_token() {
        let b = Backoff::default();
        let ip = IpAddr::from([127, 0, 0, 1]);
        let other = IpAddr::from([127, 0, 0, 2]);
        let t = Instant::now();
        for _ in 1..FREE_TRIES {
            assert_eq!(b.wrong(ip, t), None);
        }
        assert_eq!(b.paused(ip, t), None);
        assert_eq!(b.wrong(ip, t), Some(Duration::from_secs(1)));
        assert_eq!(b.paused(ip, t), Some(Duration::from_secs(1)));
        assert_eq!(b.paused(other, t), None, "per address");
        let later = t + Duration::from_secs(1);
        assert_eq!(b.paused(ip, later), None, "a pause ends");
        assert_eq!(b.wrong(ip, later), Some(Duration::from_secs(2)));
        let mut at = later;
        for _ in 0..40 {
            at += LONGEST_PAUSE;
            assert!(b.wrong(ip, at).unwrap() <= LONGEST_PAUSE);
        }
        assert_eq!(b.wrong(ip, at), Some(LONGEST_PAUSE));
        b.right(ip);
        assert_eq!(b.paused(ip, at), None);
        assert_eq!(b.wrong(ip, at), None, "the count starts again");
    }

    #[test]
    fn a_flood_from_many_addresses_keeps_the_map_bounded() {
        let b = Backoff::default();
        let t = Instant::now();
        for n in 0..(MAX_ADDRESSES as u32 * 3) {
            b.wrong(IpAddr::from(n.to_be_bytes()), t);
        }
        assert!(b.clients().len() <= MAX_ADDRESSES);
    }
}
