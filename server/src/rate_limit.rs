//! Per-process load limits keyed by client identity (a credential's digest, or the client as
//! [`crate::client_ip::client_key`] names it): the fixed-window rate limit
//! (`SHELF_API_RATE_LIMIT_PER_MINUTE`), each identity getting that many requests per minute,
//! and the cap on open event streams (`SHELF_API_MAX_STREAMS_PER_CLIENT`). Windows of idle
//! identities are pruned while requests are handled, and at most [`MAX_IDENTITIES`] are held:
//! past that, new identities share one window, so memory stays bounded however many addresses
//! a flood comes from. A stream's slot is released when its response is dropped (the stream
//! ended, or its client went away).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

pub const WINDOW: Duration = Duration::from_secs(60);

/// Most identities with a window of their own. A flood from more clients than this within a
/// minute puts the newcomers in one shared window (limited together) instead of growing the
/// map.
pub const MAX_IDENTITIES: usize = 65_536;

/// The identity of the newcomers past [`MAX_IDENTITIES`] (its window is the one more).
const OVERFLOW: &str = "overflow";

/// How often a full map is searched for expired windows.
const FULL_PRUNE_EVERY: Duration = Duration::from_secs(1);

struct Window {
    started: Instant,
    count: u32,
}

struct Windows {
    by_identity: HashMap<String, Window>,
    last_prune: Instant,
}

pub struct RateLimiter {
    per_window: u32,
    max_identities: usize,
    windows: Mutex<Windows>,
}

/// The verdict for one request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    Allowed,
    /// Denied; retry after this many seconds (at least 1).
    Limited {
        retry_after: u64,
    },
}

impl RateLimiter {
    /// `per_window == 0` disables the limit.
    pub fn new(per_window: u32) -> Self {
        Self::with_max_identities(per_window, MAX_IDENTITIES)
    }

    fn with_max_identities(per_window: u32, max_identities: usize) -> Self {
        RateLimiter {
            per_window,
            max_identities,
            windows: Mutex::new(Windows {
                by_identity: HashMap::new(),
                last_prune: Instant::now(),
            }),
        }
    }

    pub fn enabled(&self) -> bool {
        self.per_window > 0
    }

    pub fn check(&self, identity: &str) -> Verdict {
        self.check_at(identity, Instant::now())
    }

    fn check_at(&self, identity: &str, now: Instant) -> Verdict {
        if !self.enabled() {
            return Verdict::Allowed;
        }
        // A poisoned lock only means another request panicked mid-update; the counters are
        // still usable.
        let mut windows = self
            .windows
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        // When full, expired windows are dropped at once rather than at the next minute, but
        // not more than once a second: a pass over a full map must not run for every request
        // of a flood.
        let since_prune = now.saturating_duration_since(windows.last_prune);
        let full = windows.by_identity.len() >= self.max_identities;
        if since_prune >= WINDOW || (full && since_prune >= FULL_PRUNE_EVERY) {
            windows
                .by_identity
                .retain(|_, w| now.saturating_duration_since(w.started) < WINDOW);
            windows.last_prune = now;
        }
        let identity = if windows.by_identity.len() >= self.max_identities
            && !windows.by_identity.contains_key(identity)
        {
            OVERFLOW
        } else {
            identity
        };
        let window = windows
            .by_identity
            .entry(identity.to_string())
            .or_insert(Window {
                started: now,
                count: 0,
            });
        if now.saturating_duration_since(window.started) >= WINDOW {
            window.started = now;
            window.count = 0;
        }
        if window.count >= self.per_window {
            let left = WINDOW.saturating_sub(now.saturating_duration_since(window.started));
            let retry_after = left.as_secs() + u64::from(left.subsec_nanos() > 0);
            return Verdict::Limited {
                retry_after: retry_after.max(1),
            };
        }
        window.count += 1;
        Verdict::Allowed
    }

    /// Identities with a live window (for tests of pruning).
    pub fn tracked(&self) -> usize {
        self.windows
            .lock()
            .map(|w| w.by_identity.len())
            .unwrap_or(0)
    }
}

/// The cap on event streams each identity holds open at once (0: none), and their lifetime
/// (for `Retry-After`: the earliest moment one of them ends by itself).
pub struct StreamSlots {
    max: usize,
    lifetime: Duration,
    open: Arc<Mutex<OpenStreams>>,
}

#[derive(Default)]
struct OpenStreams {
    next: u64,
    /// Each identity's open streams (slot number, start); an identity with none has no entry.
    by_identity: HashMap<String, Vec<(u64, Instant)>>,
}

/// One open stream's place under the cap, given back when dropped.
pub struct StreamSlot {
    identity: String,
    number: u64,
    open: Arc<Mutex<OpenStreams>>,
}

impl Drop for StreamSlot {
    fn drop(&mut self) {
        let mut open = self
            .open
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if let Some(slots) = open.by_identity.get_mut(&self.identity) {
            slots.retain(|(number, _)| *number != self.number);
            if slots.is_empty() {
                open.by_identity.remove(&self.identity);
            }
        }
    }
}

impl StreamSlots {
    pub fn new(max: usize, lifetime: Duration) -> Self {
        StreamSlots {
            max,
            lifetime,
            open: Arc::default(),
        }
    }

    /// A slot for one more stream of `identity`, or the seconds until one of its open streams
    /// reaches its lifetime (at least 1).
    pub fn acquire(&self, identity: &str) -> Result<StreamSlot, u64> {
        self.acquire_at(identity, Instant::now())
    }

    fn acquire_at(&self, identity: &str, now: Instant) -> Result<StreamSlot, u64> {
        let mut open = self
            .open
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let number = open.next;
        let slots = open.by_identity.entry(identity.to_string()).or_default();
        if self.max > 0 && slots.len() >= self.max {
            let oldest = slots.iter().map(|(_, started)| *started).min();
            let left = oldest.map_or(Duration::ZERO, |started| {
                (started + self.lifetime).saturating_duration_since(now)
            });
            let seconds = left.as_secs() + u64::from(left.subsec_nanos() > 0);
            return Err(seconds.max(1));
        }
        slots.push((number, now));
        open.next += 1;
        Ok(StreamSlot {
            identity: identity.to_string(),
            number,
            open: self.open.clone(),
        })
    }

    /// Streams `identity` holds open.
    pub fn open(&self, identity: &str) -> usize {
        self.open
            .lock()
            .map(|o| o.by_identity.get(identity).map_or(0, Vec::len))
            .unwrap_or(0)
    }

    /// Identities with an open stream (for tests that the map shrinks).
    pub fn identities(&self) -> usize {
        self.open.lock().map(|o| o.by_identity.len()).unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identities_past_the_bound_share_one_window() {
        let limiter = RateLimiter::with_max_identities(2, 3);
        let t0 = Instant::now();
        for i in 0..3 {
            assert_eq!(limiter.check_at(&format!("ip:{i}"), t0), Verdict::Allowed);
        }
        // The map is full: two newcomers share the overflow window of 2 requests.
        assert_eq!(limiter.check_at("ip:new1", t0), Verdict::Allowed);
        assert_eq!(limiter.check_at("ip:new2", t0), Verdict::Allowed);
        assert!(matches!(
            limiter.check_at("ip:new3", t0),
            Verdict::Limited { .. }
        ));
        assert_eq!(limiter.tracked(), 4);
        // Known identities keep their own window.
        assert_eq!(limiter.check_at("ip:0", t0), Verdict::Allowed);
        // Once windows expire, a newcomer gets its own again.
        let later = t0 + WINDOW;
        assert_eq!(limiter.check_at("ip:new1", later), Verdict::Allowed);
        assert_eq!(limiter.tracked(), 1);
    }

    #[test]
    fn two_addresses_of_one_ipv6_network_are_one_client() {
        use crate::client_ip::client_key;
        let limiter = RateLimiter::new(2);
        let t0 = Instant::now();
        let key = |ip: &str| format!("ip:{}", client_key(ip.parse().expect("ip"), 64));
        assert_eq!(
            limiter.check_at(&key("2001:db8:7:1::1"), t0),
            Verdict::Allowed
        );
        assert_eq!(
            limiter.check_at(&key("2001:db8:7:1:abcd::2"), t0),
            Verdict::Allowed
        );
        assert!(matches!(
            limiter.check_at(&key("2001:db8:7:1:ffff::3"), t0),
            Verdict::Limited { .. }
        ));
        assert_eq!(
            limiter.check_at(&key("2001:db8:7:2::1"), t0),
            Verdict::Allowed
        );
        assert_eq!(limiter.check_at(&key("192.0.2.1"), t0), Verdict::Allowed);
        assert_eq!(
            limiter.check_at(&key("::ffff:192.0.2.1"), t0),
            Verdict::Allowed
        );
        assert!(matches!(
            limiter.check_at(&key("192.0.2.1"), t0),
            Verdict::Limited { .. }
        ));
        assert_eq!(limiter.tracked(), 3);
    }

    #[test]
    fn streams_are_capped_per_identity_and_slots_come_back_when_dropped() {
        let slots = StreamSlots::new(2, Duration::from_secs(300));
        let t0 = Instant::now();
        let first = slots.acquire_at("a", t0).expect("first");
        let _second = slots
            .acquire_at("a", t0 + Duration::from_secs(10))
            .expect("second");
        // Full: retry when the oldest stream reaches its lifetime.
        assert_eq!(
            slots
                .acquire_at("a", t0 + Duration::from_millis(100_500))
                .err(),
            Some(200)
        );
        assert!(slots.acquire_at("b", t0).is_ok(), "another client");
        assert_eq!(slots.open("a"), 2);
        drop(first);
        assert_eq!(slots.open("a"), 1);
        let _third = slots.acquire_at("a", t0).expect("a slot came back");
        assert_eq!(slots.identities(), 1, "b's dropped slot left no entry");
        let unlimited = StreamSlots::new(0, Duration::from_secs(1));
        let held: Vec<_> = (0..100)
            .map(|_| unlimited.acquire("a").expect("no cap"))
            .collect();
        assert_eq!(unlimited.open("a"), 100);
        drop(held);
        assert_eq!(unlimited.identities(), 0);
    }

    #[test]
    fn fixed_window_per_identity() {
        let limiter = RateLimiter::new(2);
        let t0 = Instant::now();
        assert_eq!(limiter.check_at("a", t0), Verdict::Allowed);
        assert_eq!(limiter.check_at("a", t0), Verdict::Allowed);
        assert_eq!(
            limiter.check_at("a", t0 + Duration::from_millis(500)),
            Verdict::Limited { retry_after: 60 }
        );
        assert_eq!(limiter.check_at("b", t0), Verdict::Allowed);
        assert_eq!(
            limiter.check_at("a", t0 + Duration::from_secs(59)),
            Verdict::Limited { retry_after: 1 }
        );
        assert_eq!(
            limiter.check_at("a", t0 + Duration::from_secs(60)),
            Verdict::Allowed
        );
    }

    #[test]
    fn idle_windows_are_pruned() {
        let limiter = RateLimiter::new(5);
        let t0 = Instant::now();
        for i in 0..100 {
            limiter.check_at(&format!("ip:{i}"), t0);
        }
        assert_eq!(limiter.tracked(), 100);
        limiter.check_at("fresh", t0 + Duration::from_secs(61));
        assert_eq!(limiter.tracked(), 1);
    }

    #[test]
    fn zero_disables() {
        let limiter = RateLimiter::new(0);
        for _ in 0..1000 {
            assert_eq!(limiter.check("a"), Verdict::Allowed);
        }
        assert_eq!(limiter.tracked(), 0);
    }
}
