//! A per-process fixed-window rate limit (`SHELF_API_RATE_LIMIT_PER_MINUTE`): each identity
//! (a credential's digest, or the client address) gets that many requests per minute. Windows
//! of idle identities are pruned while requests are handled, so memory follows the number of
//! identities active in the last minute.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

pub const WINDOW: Duration = Duration::from_secs(60);

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
        RateLimiter {
            per_window,
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
        if now.saturating_duration_since(windows.last_prune) >= WINDOW {
            windows
                .by_identity
                .retain(|_, w| now.saturating_duration_since(w.started) < WINDOW);
            windows.last_prune = now;
        }
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

#[cfg(test)]
mod tests {
    use super::*;

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
