//! The adaptive concurrency limit of language-model calls, as a pure state machine fed one
//! sample per finished call (no clock, no I/O: tests drive it with made-up samples).
//!
//! It combines published rules:
//! - **Slow start** (TCP, with HyStart's exit on rising delay): from a low start, each call
//!   that filled the limit and came back about as fast as on an idle server
//!   ([`SLOW_START_EXIT`]) adds a place, at most doubling the limit a round, until a round's
//!   latency rises or the server refuses.
//! - **Vegas** (TCP Vegas; Netflix concurrency-limits' `VegasLimit` and `Gradient2`): each round
//!   (about one limit's worth of calls) compares the calls' latency with the latency the same
//!   kind of call has without a queue. Near it (ratio below [`GROW_BELOW`]) the limit
//!   grows by one a round; well above it ([`SHRINK_ABOVE`]: the server queues) the limit is
//!   scaled down in proportion; in between it holds. Calls differ in size (a 12,000-character
//!   cleaning chunk against a one-line classification), so the no-queue latency is kept per
//!   class, a call's kind and its text's size in quarter-octave buckets. A round is judged
//!   by a low percentile ([`ROUND_PERCENTILE`]) of its ratios, not the median: a server's
//!   queue delays every call, while noise (answers longer than usual, a delayed TCP
//!   acknowledgement) delays some, so the fastest calls of a round show the queue and not
//!   the noise.
//! - **AIMD** on push-back, with BIC's and CUBIC's refinements: a refusal (429, 503), a
//!   server error or a timeout multiplies the limit by [`BACKOFF`] (one place less at least),
//!   from the number of calls in flight when the refused one came back (what the server
//!   really held; at most a halving at once), once per round trip. The limit then grows back
//!   halfway to that level a round, and past it only after [`PATIENCE`] without a refusal, by
//!   steps that double while no refusal comes. An unreachable server drops it to the floor,
//!   from where it slow-starts back to half of where it was (TCP's retransmission timeout).
//! - **ProbeRTT** (BBR): a queue that never drains hides the no-queue latency (calls first
//!   seen behind a queue make it look normal). So, at most every [`PROBE_INTERVAL`] and
//!   [`PROBE_ROUNDS`] rounds, one round runs at half the limit, which lets the server's queue
//!   drain and the baselines relearn; the limit then comes back and Vegas judges it anew.
//!
//! A fixed limit (`min == max`) never moves.

use std::collections::HashMap;
use std::time::{Duration, Instant};

/// The percentile of a round's latency ratios that judges it.
pub const ROUND_PERCENTILE: f64 = 0.2;
/// Latency ratio (to the no-queue latency of the same class, at [`ROUND_PERCENTILE`] of a
/// round) under which a full round grows the limit: the server answers about as fast as it
/// does idle.
pub const GROW_BELOW: f64 = 1.25;
/// Latency ratio at which slow start ends (TCP HyStart's delay increase): the server has
/// begun to queue.
pub const SLOW_START_EXIT: f64 = 1.15;
/// Latency ratio above which the limit shrinks: even the round's fast calls wait half their
/// service time or more in the server's queue.
pub const SHRINK_ABOVE: f64 = 1.5;
/// The multiplicative decrease on push-back (Netflix's AIMD default).
pub const BACKOFF: f64 = 0.9;
/// How long a no-queue latency is remembered without being seen again.
pub const EPOCH: Duration = Duration::from_secs(60);
/// Time without a refusal before the limit grows past where the server last refused: the
/// probe that finds the server full costs a refused call a `Retry-After` wait (late in a
/// batch, that wait is the batch's end), so it is made rarely; each calm probe doubles the
/// next step, so a server that grew is found in a few (TCP CUBIC's plateau near the last
/// loss, then its convex growth away from it).
pub const PATIENCE: Duration = Duration::from_secs(5);
/// Least time between two probe rounds.
pub const PROBE_INTERVAL: Duration = Duration::from_secs(10);
/// Least rounds between two probe rounds (calls that take seconds make rounds long).
pub const PROBE_ROUNDS: usize = 20;
/// A round closes after this many samples at least (and at least the limit's worth): with
/// fewer, one unlucky call moves its percentile.
const MIN_ROUND: usize = 16;
/// Latency ratios a round needs before it is judged.
const MIN_RATIOS: usize = 4;

/// The bounds and the start of the limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LimitConfig {
    pub min: usize,
    pub max: usize,
    pub initial: usize,
}

impl LimitConfig {
    /// `initial` clamped into `[min, max]`, `min` at least 1 and `max` at least `min`.
    pub fn new(min: usize, max: usize, initial: usize) -> Self {
        let min = min.max(1);
        let max = max.max(min);
        LimitConfig {
            min,
            max,
            initial: initial.clamp(min, max),
        }
    }

    pub fn is_fixed(&self) -> bool {
        self.min == self.max
    }
}

/// How one call ended, as far as the limit is concerned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// An answer (whatever its content): a latency sample.
    Answered,
    /// The server pushed back: 429, or 503 with `Retry-After`.
    Refused,
    /// The server failed or timed out under the load (other 5xx, 408, a timeout).
    Overloaded,
    /// Nothing answered at all (connection refused or reset).
    Unreachable,
    /// Says nothing about load (a refused credential, a 404, a cancelled call).
    Neutral,
}

/// A kind of call and the size of its prompt: calls of one class take about as long on an
/// idle server.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct CallClass {
    pub kind: &'static str,
    bucket: u16,
}

impl CallClass {
    /// `size`: the part of the prompt that varies between calls of the kind (its text), in
    /// bytes or characters.
    pub fn new(kind: &'static str, size: usize) -> Self {
        // Quarter octaves: two prompts in one class differ in size by less than 19 %.
        let bucket = (4.0 * (size.max(64) as f64).log2()) as u16;
        CallClass { kind, bucket }
    }
}

/// One finished call.
#[derive(Debug, Clone, Copy)]
pub struct Sample {
    pub class: CallClass,
    /// From sending the request to the whole answer.
    pub latency: Duration,
    pub outcome: Outcome,
    /// Calls in flight when this one was sent, itself included.
    pub in_flight: usize,
    /// Calls in flight when its answer came, itself included: after a refusal, about what
    /// the server held (those sent after it but answered before count too).
    pub in_flight_at_end: usize,
    /// The limit was full when this call was let through (it waited, or took the last
    /// place): only such calls say that a larger limit would be used.
    pub saturated: bool,
    /// When it finished.
    pub at: Instant,
}

/// The limit and what it has learned.
#[derive(Debug)]
pub struct AdaptiveLimit {
    config: LimitConfig,
    limit: f64,
    /// Slow start goes on while the limit is below this.
    slow_start_until: f64,
    baselines: Baselines,
    round: Round,
    /// Samples still to come from calls sent before the last backoff.
    recovering: usize,
    probe: Probe,
    /// Calls in flight when the server last refused one.
    refused_level: Option<f64>,
    /// When the server last refused a call, or the limit last grew near `refused_level`.
    calm_since: Option<Instant>,
    /// The next growth past `refused_level`.
    probe_step: f64,
    /// The last round was judged, and as fast as an idle server (or none was yet).
    last_round_fast: bool,
}

/// When the last probe round was, and the limit to come back to during one.
#[derive(Debug, Default)]
struct Probe {
    last: Option<Instant>,
    rounds_since: usize,
    restore_to: Option<f64>,
}

#[derive(Debug, Default)]
struct Round {
    /// Samples that close it: the limit when it opened (slow start grows the limit within a
    /// round, which must not keep the round open).
    target: usize,
    /// The limit when it opened.
    opened_at: f64,
    samples: usize,
    saturated: usize,
    ratios: Vec<f64>,
}

impl AdaptiveLimit {
    pub fn new(config: LimitConfig) -> Self {
        AdaptiveLimit {
            config,
            limit: config.initial as f64,
            slow_start_until: config.max as f64,
            baselines: Baselines::default(),
            round: Round {
                target: config.initial.max(MIN_RATIOS),
                opened_at: config.initial as f64,
                ..Round::default()
            },
            recovering: 0,
            probe: Probe::default(),
            refused_level: None,
            calm_since: None,
            probe_step: 1.0,
            last_round_fast: true,
        }
    }

    /// The current limit: calls allowed in flight.
    pub fn limit(&self) -> usize {
        (self.limit.floor() as usize).clamp(self.config.min, self.config.max)
    }

    pub fn config(&self) -> LimitConfig {
        self.config
    }

    /// Whether the limit is still doubling (no congestion seen yet).
    pub fn in_slow_start(&self) -> bool {
        self.limit < self.slow_start_until
    }

    /// Learns from one finished call; returns the new limit.
    pub fn on_sample(&mut self, sample: Sample) -> usize {
        if self.config.is_fixed() {
            return self.limit();
        }
        // Calls sent before the last backoff end with the old limit's outcome: a refusal
        // among them is not a new sign (TCP's once per window).
        let recovering = self.recovering > 0;
        self.recovering = self.recovering.saturating_sub(1);
        match sample.outcome {
            Outcome::Answered => {
                let ratio =
                    self.baselines
                        .ratio(sample.class, sample.latency, sample.in_flight, sample.at);
                if recovering {
                    // Sent under the limit before the last change: it teaches the baselines,
                    // not the round that judges the new limit.
                    return self.limit();
                }
                if let Some(ratio) = ratio {
                    self.round.ratios.push(ratio);
                }
                if sample.saturated {
                    self.round.saturated += 1;
                    // Slow start: one place more for each call that filled the limit and came
                    // back as fast as on an idle server, at most a doubling a round. A call of
                    // a class never seen (a batch's first documents) has nothing to compare
                    // with: it counts as fast only after a round judged fast, so a stream of
                    // them cannot carry slow start on unjudged.
                    let fast = ratio.map_or(self.last_round_fast, |r| r < SLOW_START_EXIT);
                    if self.in_slow_start()
                        && fast
                        && self.probe.restore_to.is_none()
                        && self.limit + 1.0 <= self.round.opened_at * 2.0
                    {
                        self.set((self.limit + 1.0).min(self.slow_start_until));
                    }
                }
            }
            Outcome::Refused | Outcome::Overloaded if !recovering => {
                if let Some(limit) = self.probe.restore_to.take() {
                    self.limit = limit;
                }
                // What the server held when it refused, but never less than half the limit at
                // once (TCP's halving): a refusal caused by another client's burst, seen with
                // few calls of ours in flight, must not collapse the limit.
                let old = self.limit;
                let held = (sample.in_flight_at_end.max(1) as f64).clamp(old / 2.0, old);
                // Below what was refused, by a tenth, and by one place at least (0.9 x 4
                // would still send 4).
                self.set((held * BACKOFF).min(held - 1.0));
                self.refused_level = Some(held);
                self.calm_since = Some(sample.at);
                self.probe_step = 1.0;
                tracing::debug!(
                    old,
                    limit = self.limit,
                    in_flight = sample.in_flight_at_end,
                    "language-model limiter backoff"
                );
                self.slow_start_until = self.limit;
                self.restart(old);
                return self.limit();
            }
            Outcome::Unreachable if !recovering => {
                if let Some(limit) = self.probe.restore_to.take() {
                    self.limit = limit;
                }
                // Nobody answered: start over from the floor, slow-starting to half the old
                // limit (TCP's retransmission timeout).
                let old = self.limit;
                self.slow_start_until = (old / 2.0).max(self.config.min as f64);
                self.set(self.config.min as f64);
                self.restart(old);
                return self.limit();
            }
            Outcome::Refused | Outcome::Overloaded | Outcome::Unreachable => {}
            Outcome::Neutral => return self.limit(),
        }
        self.round.samples += 1;
        if self.round.samples >= self.round.target {
            self.close_round(sample.at);
        }
        self.limit()
    }

    /// After a backoff from `old` limit: a new round, and the calls still out (at most the
    /// old limit's, but this one) are let finish first.
    fn restart(&mut self, old: f64) {
        self.recovering = (old as usize).saturating_sub(1);
        self.round = Round {
            target: self.round_target(),
            opened_at: self.limit,
            ..Round::default()
        };
    }

    /// Vegas, once a round: grow, hold or shrink by the round's low-percentile latency ratio; or the
    /// end or the start of a probe round.
    fn close_round(&mut self, at: Instant) {
        let round = std::mem::take(&mut self.round);
        if let Some(limit) = self.probe.restore_to.take() {
            // The probe's calls taught the baselines; the limit comes back.
            self.set(limit);
            self.probe.last = Some(at);
            self.probe.rounds_since = 0;
        } else if round.ratios.len() < MIN_RATIOS {
            self.last_round_fast = false;
        } else {
            let ratio = percentile(round.ratios, ROUND_PERCENTILE);
            self.last_round_fast = ratio < SLOW_START_EXIT;
            tracing::debug!(
                limit = self.limit,
                ratio,
                samples = round.samples,
                saturated = round.saturated,
                slow_start = self.in_slow_start(),
                "language-model limiter round"
            );
            if self.in_slow_start() && ratio < SLOW_START_EXIT {
                // Slow start goes on (it grew call by call above).
            } else if ratio > SHRINK_ABOVE {
                // Scaled so that the queue the ratio shows would shrink to about GROW_BELOW;
                // the calls still out were sent with the old limit and carry its queue.
                let old = self.limit;
                let factor = (GROW_BELOW / ratio).clamp(0.5, 1.0);
                self.set(old * factor);
                self.slow_start_until = self.limit;
                self.recovering = (old as usize).saturating_sub(1);
            } else if ratio >= GROW_BELOW || self.in_slow_start() {
                // Latency has begun to rise: leave slow start, hold.
                self.slow_start_until = self.slow_start_until.min(self.limit);
            } else if !self.in_slow_start() && round.saturated * 2 >= round.samples {
                match self.refused_level {
                    // Far below where the server refused: halfway back there a round (BIC's
                    // binary increase), so a backoff costs few rounds at a lower limit.
                    Some(level) if self.limit + 2.0 < level => {
                        self.set(self.limit + ((level - 1.0 - self.limit) / 2.0).max(1.0));
                    }
                    // Near it: a step only after a calm while.
                    Some(_) => {
                        let since = *self.calm_since.get_or_insert(at);
                        if at.saturating_duration_since(since) >= PATIENCE {
                            self.set(self.limit + self.probe_step);
                            self.probe_step *= 2.0;
                            self.calm_since = Some(at);
                        }
                    }
                    None => self.set(self.limit + 1.0),
                }
            }
        }
        if !self.in_slow_start() {
            self.probe.rounds_since += 1;
            let last = *self.probe.last.get_or_insert(at);
            if self.probe.rounds_since >= PROBE_ROUNDS
                && at.saturating_duration_since(last) >= PROBE_INTERVAL
                && self.limit() > self.config.min
            {
                self.probe.restore_to = Some(self.limit);
                self.set(self.limit / 2.0);
            }
        }
        self.round.target = self.round_target();
        self.round.opened_at = self.limit;
    }

    /// The samples that close a round: the limit's worth (TCP's round trip), at least
    /// [`MIN_ROUND`] once slow start is over, so one unlucky call cannot move a round's
    /// percentile; in slow start, at least [`MIN_RATIOS`], so that growth from a low start
    /// (one call, against a server of unknown size) takes a handful of calls a doubling, as
    /// TCP's does a round trip.
    fn round_target(&self) -> usize {
        if self.in_slow_start() {
            self.limit().max(MIN_RATIOS)
        } else {
            self.limit().max(MIN_ROUND)
        }
    }

    /// Whether this round runs at half the limit to drain the server's queue.
    pub fn probing(&self) -> bool {
        self.probe.restore_to.is_some()
    }

    fn set(&mut self, limit: f64) {
        self.limit = limit.clamp(self.config.min as f64, self.config.max as f64);
    }
}

/// The `q` percentile of `values` (not empty), nearest rank.
fn percentile(mut values: Vec<f64>, q: f64) -> f64 {
    values.sort_by(f64::total_cmp);
    let rank = ((values.len() - 1) as f64 * q).round() as usize;
    values[rank.min(values.len() - 1)]
}

/// The no-queue latency of each class: the least latency seen, and the concurrency it was
/// seen at. A later call is compared with it; at the end of each [`EPOCH`] it is replaced by
/// the least latency of that epoch among calls sent with no more calls in flight (so a
/// server that got slower is relearned), never by calls sent at a higher concurrency, which
/// would carry more queue and let the limit ratchet up.
#[derive(Debug, Default)]
struct Baselines {
    epoch_started: Option<Instant>,
    classes: HashMap<CallClass, Baseline>,
}

#[derive(Debug, Clone, Copy)]
struct Seen {
    latency: Duration,
    in_flight: usize,
}

#[derive(Debug)]
struct Baseline {
    least: Seen,
    /// The least of this epoch among calls at about `least`'s concurrency or below.
    this_epoch: Option<Seen>,
}

impl Baselines {
    /// `latency` over the class's no-queue latency (none for a class never seen), then
    /// learns from the call.
    fn ratio(
        &mut self,
        class: CallClass,
        latency: Duration,
        in_flight: usize,
        at: Instant,
    ) -> Option<f64> {
        let started = *self.epoch_started.get_or_insert(at);
        if at.saturating_duration_since(started) >= EPOCH {
            for baseline in self.classes.values_mut() {
                if let Some(seen) = baseline.this_epoch.take() {
                    baseline.least = seen;
                }
            }
            self.epoch_started = Some(at);
        }
        let seen = Seen { latency, in_flight };
        let Some(baseline) = self.classes.get_mut(&class) else {
            self.classes.insert(
                class,
                Baseline {
                    least: seen,
                    this_epoch: None,
                },
            );
            return None;
        };
        let base = baseline.least.latency.max(Duration::from_micros(100));
        let ratio = latency.as_secs_f64() / base.as_secs_f64();
        if latency < baseline.least.latency {
            baseline.least = seen;
        }
        let comparable = baseline.least.in_flight + (baseline.least.in_flight / 4).max(1);
        if in_flight <= comparable
            && baseline
                .this_epoch
                .is_none_or(|least| latency < least.latency)
        {
            baseline.this_epoch = Some(seen);
        }
        Some(ratio)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const CLEAN: &str = "clean";

    /// A model server with `slots` parallel places and an unbounded queue, seen from a client
    /// that always has more calls ready than its limit: every call of a round is sent with the
    /// limit full, and waits in line when the limit is above the slots.
    fn queueing_round(limit: &mut AdaptiveLimit, slots: usize, at: &mut Instant) {
        answered(limit, slots, at, MIN_ROUND);
    }

    /// The limit's worth of calls (`least` at least) answered by a queueing server of
    /// `slots`, each a sample sent with the limit full; returns how many.
    fn answered(limit: &mut AdaptiveLimit, slots: usize, at: &mut Instant, least: usize) -> usize {
        let in_flight = limit.limit();
        let queued = in_flight.saturating_sub(slots) as f64 / slots as f64;
        let latency = Duration::from_millis(100).mul_f64(1.0 + queued);
        *at += latency;
        let calls = in_flight.max(least);
        for _ in 0..calls {
            limit.on_sample(Sample {
                class: CallClass::new(CLEAN, 12_000),
                latency,
                outcome: Outcome::Answered,
                in_flight,
                in_flight_at_end: in_flight,
                saturated: true,
                at: *at,
            });
        }
        calls
    }

    /// A server with `slots` places that refuses what does not fit.
    fn refusing_round(limit: &mut AdaptiveLimit, slots: usize, at: &mut Instant) {
        let in_flight = limit.limit();
        *at += Duration::from_millis(100);
        for i in 0..in_flight.max(MIN_ROUND) {
            let outcome = if i % in_flight.max(1) < slots {
                Outcome::Answered
            } else {
                Outcome::Refused
            };
            limit.on_sample(Sample {
                class: CallClass::new(CLEAN, 12_000),
                latency: Duration::from_millis(100),
                outcome,
                in_flight,
                in_flight_at_end: in_flight,
                saturated: true,
                at: *at,
            });
        }
    }

    fn auto() -> AdaptiveLimit {
        AdaptiveLimit::new(LimitConfig::new(1, 128, 8))
    }

    #[test]
    fn it_grows_to_a_large_server_and_settles_just_above_its_slots() {
        let mut at = Instant::now();
        let mut limit = auto();
        for _ in 0..60 {
            queueing_round(&mut limit, 32, &mut at);
        }
        let settled = limit.limit();
        assert!((32..=48).contains(&settled), "settled at {settled}");
        assert!(!limit.in_slow_start());
    }

    /// One round trip of a client that keeps its limit full against a queueing server of
    /// `slots`: the limit's worth of calls (one at least), each a sample; returns how many.
    fn round_trip(limit: &mut AdaptiveLimit, slots: usize, at: &mut Instant) -> usize {
        answered(limit, slots, at, 1)
    }

    fn default_start() -> AdaptiveLimit {
        AdaptiveLimit::new(LimitConfig::new(
            1,
            128,
            crate::provider::limiter::INITIAL_LIMIT,
        ))
    }

    #[test]
    fn from_one_call_a_large_server_is_reached_within_a_few_dozen_calls() {
        let mut at = Instant::now();
        let mut limit = default_start();
        assert_eq!(limit.limit(), 1);
        let mut calls = 0;
        while limit.limit() < 32 {
            calls += round_trip(&mut limit, 32, &mut at);
            assert!(
                calls <= 100,
                "still at {} after {calls} calls",
                limit.limit()
            );
        }
        for _ in 0..60 {
            queueing_round(&mut limit, 32, &mut at);
        }
        assert!(
            (32..=48).contains(&limit.limit()),
            "settled at {}",
            limit.limit()
        );
    }

    #[test]
    fn a_one_slot_server_never_has_more_than_one_call_waiting() {
        let mut at = Instant::now();
        let mut limit = default_start();
        let mut most = 0;
        for _ in 0..2_000 {
            round_trip(&mut limit, 1, &mut at);
            most = most.max(limit.limit());
        }
        assert!(most <= 2, "sent {most} at once to a server of one slot");
    }

    #[test]
    fn it_shrinks_toward_a_small_queueing_server() {
        let mut at = Instant::now();
        let mut limit = AdaptiveLimit::new(LimitConfig::new(1, 128, 64));
        // The first round at 64 teaches the baseline a queued latency, which looks normal
        // until probe rounds at half the limit show lower latencies: each probe lowers the
        // baseline, Vegas then shrinks the limit, down to about the server's size.
        let mut seen = Vec::new();
        for _ in 0..400 {
            queueing_round(&mut limit, 4, &mut at);
            if !limit.probing() {
                seen.push(limit.limit());
            }
        }
        let late = &seen[seen.len() - 50..];
        assert!(late.iter().all(|l| (4..=8).contains(l)), "{late:?}");
    }

    #[test]
    fn refusals_hold_it_at_a_refusing_servers_size() {
        let mut at = Instant::now();
        let mut limit = auto();
        let mut seen = Vec::new();
        for _ in 0..100 {
            refusing_round(&mut limit, 16, &mut at);
            seen.push(limit.limit());
        }
        let late = &seen[50..];
        assert!(late.iter().all(|l| (13..=17).contains(l)), "{late:?}");
        assert!(
            late.iter().any(|l| *l >= 16),
            "never probes back up: {late:?}"
        );
    }

    /// One round of two clients of a server with `slots` places that refuses what does not
    /// fit: each sends its limit's worth of calls, spread evenly over the round and interleaved
    /// (who goes first alternates by round), and the calls that arrive after the slots are
    /// full are refused; the refusals come back first.
    fn shared_refusing_round(
        clients: &mut [&mut AdaptiveLimit; 2],
        slots: usize,
        round: usize,
        at: &mut Instant,
    ) {
        *at += Duration::from_millis(100);
        let sent = [clients[0].limit(), clients[1].limit()];
        let mut arrivals: Vec<(f64, usize)> = (0..2)
            .flat_map(|i| {
                let nudge = if (round + i).is_multiple_of(2) {
                    0.0
                } else {
                    1e-9
                };
                (0..sent[i]).map(move |k| ((k as f64 + 0.5) / sent[i] as f64 + nudge, i))
            })
            .collect();
        arrivals.sort_by(|a, b| a.0.total_cmp(&b.0));
        let mut refused = [0, 0];
        for (_, i) in arrivals.iter().skip(slots) {
            refused[*i] += 1;
        }
        for (i, client) in clients.iter_mut().enumerate() {
            for call in 0..sent[i] {
                client.on_sample(Sample {
                    class: CallClass::new(CLEAN, 12_000),
                    latency: Duration::from_millis(100),
                    outcome: if call < refused[i] {
                        Outcome::Refused
                    } else {
                        Outcome::Answered
                    },
                    in_flight: sent[i],
                    in_flight_at_end: sent[i],
                    saturated: true,
                    at: *at,
                });
            }
        }
    }

    #[test]
    fn two_clients_of_one_refusing_server_converge_to_fair_shares() {
        // One client has the server to itself; a second joins at the floor. Without a
        // coordinator, backing off in proportion to what each holds brings them to about
        // half each (AIMD), and keeps them there.
        let mut at = Instant::now();
        let slots = 16;
        let mut big = AdaptiveLimit::new(LimitConfig::new(1, 128, 16));
        let mut late = AdaptiveLimit::new(LimitConfig::new(1, 128, 1));
        let (mut sum_big, mut sum_late, mut rounds) = (0, 0, 0);
        for round in 0..6_000 {
            shared_refusing_round(&mut [&mut big, &mut late], slots, round, &mut at);
            if round >= 3_000 {
                sum_big += big.limit();
                sum_late += late.limit();
                rounds += 1;
            }
        }
        let (mean_big, mean_late) = (
            sum_big as f64 / rounds as f64,
            sum_late as f64 / rounds as f64,
        );
        assert!(
            (5.0..=11.0).contains(&mean_big) && (5.0..=11.0).contains(&mean_late),
            "shares over the last 300 s of 10 minutes: {mean_big:.1} and {mean_late:.1}"
        );
        assert!(
            mean_big + mean_late >= slots as f64 * 0.8,
            "together they keep the server busy: {mean_big:.1} + {mean_late:.1}"
        );
    }

    #[test]
    fn a_refusal_backs_off_from_what_the_server_held() {
        let start = Instant::now();
        let mut limit = AdaptiveLimit::new(LimitConfig::new(1, 128, 40));
        // One refusal sent with 30 in flight: the server held about 30, not 40.
        limit.on_sample(Sample {
            class: CallClass::new(CLEAN, 100),
            latency: Duration::from_millis(5),
            outcome: Outcome::Refused,
            in_flight: 30,
            in_flight_at_end: 30,
            saturated: true,
            at: start,
        });
        for _ in 0..39 {
            limit.on_sample(Sample {
                class: CallClass::new(CLEAN, 100),
                latency: Duration::from_millis(100),
                outcome: Outcome::Answered,
                in_flight: 40,
                in_flight_at_end: 40,
                saturated: true,
                at: start,
            });
        }
        assert_eq!(limit.limit(), 27);
        // Refused with 2 in flight (another client filled the server): at most a halving.
        let mut limit = AdaptiveLimit::new(LimitConfig::new(1, 128, 40));
        limit.on_sample(Sample {
            class: CallClass::new(CLEAN, 100),
            latency: Duration::from_millis(5),
            outcome: Outcome::Refused,
            in_flight: 2,
            in_flight_at_end: 2,
            saturated: true,
            at: start,
        });
        assert_eq!(limit.limit(), 18);
    }

    #[test]
    fn an_unreachable_server_drops_it_to_the_floor_then_it_slow_starts() {
        let start = Instant::now();
        let mut limit = AdaptiveLimit::new(LimitConfig::new(2, 128, 32));
        for _ in 0..32 {
            limit.on_sample(Sample {
                class: CallClass::new(CLEAN, 100),
                latency: Duration::from_millis(1),
                outcome: Outcome::Unreachable,
                in_flight: 32,
                in_flight_at_end: 32,
                saturated: true,
                at: start,
            });
        }
        assert_eq!(limit.limit(), 2);
        assert!(limit.in_slow_start());
        let mut at = start;
        for _ in 0..10 {
            queueing_round(&mut limit, 64, &mut at);
        }
        assert!(limit.limit() >= 16, "{}", limit.limit());
    }

    #[test]
    fn it_does_not_grow_when_the_limit_is_not_used() {
        let start = Instant::now();
        let mut limit = auto();
        for _ in 0..100 {
            limit.on_sample(Sample {
                class: CallClass::new(CLEAN, 100),
                latency: Duration::from_millis(50),
                outcome: Outcome::Answered,
                in_flight: 2,
                in_flight_at_end: 2,
                saturated: false,
                at: start,
            });
        }
        assert_eq!(limit.limit(), 8);
    }

    #[test]
    fn a_fixed_limit_never_moves_and_neutral_outcomes_teach_nothing() {
        let start = Instant::now();
        let mut fixed = AdaptiveLimit::new(LimitConfig::new(6, 6, 99));
        let mut at = start;
        refusing_round(&mut fixed, 1, &mut at);
        queueing_round(&mut fixed, 64, &mut at);
        assert_eq!(fixed.limit(), 6);
        let mut limit = auto();
        for _ in 0..100 {
            limit.on_sample(Sample {
                class: CallClass::new(CLEAN, 100),
                latency: Duration::from_millis(1),
                outcome: Outcome::Neutral,
                in_flight: 8,
                in_flight_at_end: 8,
                saturated: true,
                at: start,
            });
        }
        assert_eq!(limit.limit(), 8);
    }

    #[test]
    fn calls_of_classes_never_seen_do_not_grow_it() {
        // The first call of each class has nothing to be compared with: a stream of them
        // (each document a new size) grows the limit for one round (as after a fast round),
        // then no more, since no round can be judged.
        let start = Instant::now();
        let mut limit = AdaptiveLimit::new(LimitConfig::new(1, 128, 16));
        for i in 0..200usize {
            limit.on_sample(Sample {
                // Each a quarter octave above the last: a new class every time.
                class: CallClass::new(CLEAN, (64.0 * 2f64.powf(i as f64 / 4.0 + 0.1)) as usize),
                latency: Duration::from_millis(100),
                outcome: Outcome::Answered,
                in_flight: 16,
                in_flight_at_end: 16,
                saturated: true,
                at: start,
            });
        }
        assert_eq!(limit.limit(), 32);
    }

    #[test]
    fn calls_of_different_sizes_are_not_mistaken_for_a_queue() {
        // Short and long calls mixed on an idle server: each is compared with its own class,
        // so the limit keeps growing.
        let start = Instant::now();
        let mut limit = auto();
        for i in 0..2_000usize {
            let long = i % 3 == 0;
            limit.on_sample(Sample {
                class: CallClass::new(if long { CLEAN } else { "classify" }, 12_000),
                latency: Duration::from_millis(if long { 190 } else { 41 }),
                outcome: Outcome::Answered,
                in_flight: limit.limit(),
                in_flight_at_end: limit.limit(),
                saturated: true,
                at: start,
            });
        }
        assert_eq!(limit.limit(), 128);
    }

    #[test]
    fn baselines_are_relearned_at_the_same_concurrency_only() {
        let start = Instant::now();
        let mut baselines = Baselines::default();
        let class = CallClass::new(CLEAN, 1_000);
        let ms = Duration::from_millis;
        assert_eq!(baselines.ratio(class, ms(100), 4, start), None);
        // Slow calls at a much higher concurrency carry queue: they never become the baseline.
        assert_eq!(baselines.ratio(class, ms(400), 40, start), Some(4.0));
        let r = baselines.ratio(class, ms(400), 40, start + EPOCH * 3);
        assert_eq!(r, Some(4.0));
        // The server got slower for good: at the same concurrency, 200 ms is the new normal
        // once the epoch it was seen in is over.
        assert_eq!(
            baselines.ratio(class, ms(200), 4, start + EPOCH * 3),
            Some(2.0)
        );
        let r = baselines.ratio(class, ms(200), 4, start + EPOCH * 4);
        assert_eq!(r, Some(1.0));
    }

    #[test]
    fn classes_split_by_kind_and_size() {
        assert_eq!(CallClass::new(CLEAN, 10_000), CallClass::new(CLEAN, 10_500));
        assert_ne!(CallClass::new(CLEAN, 10_000), CallClass::new(CLEAN, 14_000));
        assert_ne!(
            CallClass::new(CLEAN, 10_000),
            CallClass::new("summarize", 10_000)
        );
        assert_eq!(CallClass::new(CLEAN, 0), CallClass::new(CLEAN, 64));
    }
}
