//! One limiter of in-flight language-model calls per process, shared by every stage and every
//! run: a call waits here (in line, first come first served) until the number of calls in
//! flight is under the limit, and reports how it ended when it is done, which moves the limit
//! ([`algorithm`]). The queue worker reads the same limiter to decide whether to claim another
//! run ([`pacer`]), and the application exports its state ([`stats`]).

pub mod algorithm;
mod pacer;
mod stats;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore};

pub use algorithm::{AdaptiveLimit, CallClass, LimitConfig, Outcome};
pub use pacer::ModelPacer;
pub use stats::LimiterReport;

/// The start of an adaptive limit: one call, since the server's size is unknown and the
/// servers people run on their own machines take one at a time (llama.cpp's and Ollama's with
/// one slot queue a second request, so its wait for a first token is a whole answer's time;
/// llama-cpp-python's cuts the answer it is streaming short for it). Slow start doubles the
/// limit every few calls while answers come back as fast as on an idle server, so a large
/// server is reached within a few dozen calls (issue 35; it started at 16 before, which
/// queued fifteen answers behind one on a one-slot server and timed them out).
pub const INITIAL_LIMIT: usize = 1;

pub struct Limiter {
    /// Holds the limit's places; a call holds one until its answer begins.
    places: Arc<Semaphore>,
    state: Mutex<GateState>,
    in_flight: AtomicUsize,
    waiting: AtomicUsize,
    /// Calls waiting out a refusal before they are sent again.
    pushed_back: AtomicUsize,
    /// Signalled whenever a call starts waiting, is let through or ends.
    changed: Notify,
    stats: stats::Stats,
}

struct GateState {
    limit: AdaptiveLimit,
    /// The limit the semaphore holds places for.
    applied: usize,
    /// Places still to take back from calls in flight after the limit fell below them.
    debt: usize,
}

impl std::fmt::Debug for Limiter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Limiter")
            .field("limit", &self.limit())
            .field("in_flight", &self.in_flight())
            .field("waiting", &self.waiting())
            .finish()
    }
}

impl Limiter {
    pub fn new(config: LimitConfig) -> Arc<Self> {
        let limit = AdaptiveLimit::new(config);
        let applied = limit.limit();
        Arc::new(Limiter {
            places: Arc::new(Semaphore::new(applied)),
            state: Mutex::new(GateState {
                limit,
                applied,
                debt: 0,
            }),
            in_flight: AtomicUsize::new(0),
            waiting: AtomicUsize::new(0),
            pushed_back: AtomicUsize::new(0),
            changed: Notify::new(),
            stats: stats::Stats::new(),
        })
    }

    /// Waits for a place, in line behind the calls that came first. Dropping the future
    /// leaves the line; dropping the permit without [`CallPermit::finish`] frees the place
    /// and teaches the limit nothing (a cancelled call).
    pub async fn acquire(self: &Arc<Self>, class: CallClass) -> CallPermit {
        let (place, waited) = match self.places.clone().try_acquire_owned() {
            Ok(place) => (place, false),
            Err(_) => {
                self.waiting.fetch_add(1, Ordering::SeqCst);
                self.changed.notify_one();
                let in_line = InLine(self);
                // The semaphore is never closed, so this only ends with a place.
                let place = self.places.clone().acquire_owned().await;
                drop(in_line);
                match place {
                    Ok(place) => (place, true),
                    Err(_) => unreachable!("the limiter's semaphore is never closed"),
                }
            }
        };
        let in_flight = self.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
        self.changed.notify_one();
        CallPermit {
            limiter: self.clone(),
            place: Some(place),
            class,
            sent: Instant::now(),
            in_flight,
            saturated: waited || self.places.available_permits() == 0,
        }
    }

    /// Calls allowed in flight now.
    pub fn limit(&self) -> usize {
        self.lock().limit.limit()
    }

    pub fn config(&self) -> LimitConfig {
        self.lock().limit.config()
    }

    /// Calls whose request is out.
    pub fn in_flight(&self) -> usize {
        self.in_flight.load(Ordering::SeqCst)
    }

    /// Calls waiting for a place.
    pub fn waiting(&self) -> usize {
        self.waiting.load(Ordering::SeqCst)
    }

    /// Resolves after the next change of calls in flight or waiting (or at once if one came
    /// since the last wait: a change is never missed).
    pub async fn changed(&self) {
        self.changed.notified().await;
    }

    /// Waits out one refusal the server answered (429, or 503 with `Retry-After`): `wait`,
    /// counted, and the call counted as held by the model meanwhile (the pacer must not take
    /// its run for one doing other work).
    pub async fn wait_out_push_back(&self, wait: Duration) {
        self.stats.pushed_back(wait);
        self.pushed_back.fetch_add(1, Ordering::SeqCst);
        let _counted = PushedBack(self);
        tokio::time::sleep(wait).await;
    }

    /// How long calls have waited out refusals in all (the push-back waits' sum).
    pub fn pushed_back_for(&self) -> Duration {
        self.stats.pushed_back_for()
    }

    /// Calls waiting out a refusal now.
    pub fn pushed_back(&self) -> usize {
        self.pushed_back.load(Ordering::SeqCst)
    }

    /// What the limiter has seen since the last report (for the worker's log line).
    pub fn report(&self) -> LimiterReport {
        self.stats
            .report(self.limit(), self.in_flight(), self.waiting())
    }

    /// The limiter's Prometheus series, for the application's registry.
    pub fn collectors(self: &Arc<Self>) -> Vec<Box<dyn prometheus::core::Collector>> {
        stats::collectors(self)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, GateState> {
        // The state is a few numbers changed in one step each: a panic elsewhere leaves them
        // consistent, so a poisoned lock is used as is.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Frees a place and, when the call taught the limit something, moves the limit.
    fn release(&self, place: OwnedSemaphorePermit, sample: Option<algorithm::Sample>) {
        let mut state = self.lock();
        if let Some(sample) = sample {
            let limit = state.limit.on_sample(sample);
            resize(&self.places, &mut state, limit);
        }
        if state.debt > 0 {
            state.debt -= 1;
            place.forget();
        } else {
            drop(place);
        }
        drop(state);
        self.in_flight.fetch_sub(1, Ordering::SeqCst);
        self.changed.notify_one();
    }
}

/// Gives the semaphore `limit` places: new ones at once, fewer by taking back free places
/// now and busy ones as their calls end.
fn resize(places: &Semaphore, state: &mut GateState, limit: usize) {
    if limit > state.applied {
        let mut more = limit - state.applied;
        let repaid = more.min(state.debt);
        state.debt -= repaid;
        more -= repaid;
        places.add_permits(more);
    } else if limit < state.applied {
        let fewer = state.applied - limit;
        let taken = places.forget_permits(fewer);
        state.debt += fewer - taken;
    }
    state.applied = limit;
}

/// Counts a call as waiting out a refusal, including when its caller gives up.
struct PushedBack<'a>(&'a Limiter);

impl Drop for PushedBack<'_> {
    fn drop(&mut self) {
        self.0.pushed_back.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Counts a call as waiting while it is in line, including when its caller gives up.
struct InLine<'a>(&'a Limiter);

impl Drop for InLine<'_> {
    fn drop(&mut self) {
        self.0.waiting.fetch_sub(1, Ordering::SeqCst);
        self.0.changed.notify_one();
    }
}

/// A place for one call's request.
pub struct CallPermit {
    limiter: Arc<Limiter>,
    place: Option<OwnedSemaphorePermit>,
    class: CallClass,
    sent: Instant,
    in_flight: usize,
    saturated: bool,
}

impl CallPermit {
    /// Frees the place and teaches the limit how the call ended.
    pub fn finish(mut self, outcome: Outcome) {
        let latency = self.sent.elapsed();
        self.limiter.stats.finished(outcome, latency);
        if let Some(place) = self.place.take() {
            let sample = algorithm::Sample {
                class: self.class,
                latency,
                outcome,
                in_flight: self.in_flight,
                in_flight_at_end: self.limiter.in_flight(),
                saturated: self.saturated,
                at: Instant::now(),
            };
            self.limiter.release(place, Some(sample));
        }
    }
}

impl Drop for CallPermit {
    fn drop(&mut self) {
        if let Some(place) = self.place.take() {
            self.limiter.release(place, None);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn class() -> CallClass {
        CallClass::new("clean", 1_000)
    }

    #[tokio::test]
    async fn calls_wait_in_line_and_a_lower_limit_takes_places_back_as_calls_end() {
        let limiter = Limiter::new(LimitConfig::new(1, 16, 4));
        let mut held = Vec::new();
        for _ in 0..4 {
            held.push(limiter.acquire(class()).await);
        }
        assert_eq!(limiter.in_flight(), 4);
        // A fifth waits in line.
        let waiter = {
            let limiter = limiter.clone();
            tokio::spawn(async move { limiter.acquire(class()).await })
        };
        while limiter.waiting() == 0 {
            limiter.changed().await;
        }
        // Two places taken back while all four are busy: they are repaid as calls end.
        {
            let mut state = limiter.lock();
            resize(&limiter.places, &mut state, 2);
        }
        drop(held.pop());
        drop(held.pop());
        assert_eq!(limiter.in_flight(), 2);
        assert_eq!(limiter.waiting(), 1, "no place was free for the fifth");
        drop(held.pop());
        let fifth = waiter.await.unwrap();
        assert_eq!(limiter.in_flight(), 2);
        drop(fifth);
        drop(held);
        assert_eq!(limiter.places.available_permits(), 2);
    }

    #[tokio::test]
    async fn a_caller_that_gives_up_leaves_the_line() {
        let limiter = Limiter::new(LimitConfig::new(1, 1, 1));
        let held = limiter.acquire(class()).await;
        let waiting = {
            let limiter = limiter.clone();
            tokio::spawn(async move {
                let _never = limiter.acquire(class()).await;
            })
        };
        while limiter.waiting() == 0 {
            limiter.changed().await;
        }
        waiting.abort();
        let _ = waiting.await;
        assert_eq!(limiter.waiting(), 0);
        held.finish(Outcome::Answered);
        assert_eq!(limiter.in_flight(), 0);
        assert_eq!(limiter.places.available_permits(), 1);
    }

    #[tokio::test]
    async fn finished_calls_move_the_limit() {
        let limiter = Limiter::new(LimitConfig::new(1, 64, 4));
        // In slow start, the call that filled the limit (the fourth), of a class seen before
        // and as fast, adds a place.
        let permits = futures::future::join_all((0..4).map(|_| limiter.acquire(class()))).await;
        for permit in permits {
            permit.finish(Outcome::Answered);
        }
        assert_eq!(limiter.limit(), 5);
        // A refusal backs off at once, below the four the server held; the others were sent
        // before it and teach nothing more.
        let permits = futures::future::join_all((0..4).map(|_| limiter.acquire(class()))).await;
        for permit in permits {
            permit.finish(Outcome::Refused);
        }
        assert_eq!(limiter.limit(), 3, "four held when refused: one fewer");
        assert_eq!(limiter.places.available_permits(), 3);
        assert_eq!(limiter.in_flight(), 0);
        let report = limiter.report();
        assert_eq!(report.refused, 4);
        assert_eq!(report.calls, 8);
    }
}
