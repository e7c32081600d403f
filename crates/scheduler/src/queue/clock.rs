//! The queue's notion of time, injectable so tests can drive backoff and flush timing.

use std::time::{Duration, Instant};

use parking_lot::Mutex;

/// A source of the current time.
pub trait Clock: Send + Sync {
    /// The current instant.
    fn now(&self) -> Instant;
}

/// The system's monotonic clock.
#[derive(Debug, Default, Clone, Copy)]
pub struct RealClock;

impl Clock for RealClock {
    fn now(&self) -> Instant {
        Instant::now()
    }
}

/// A clock that only moves when told to.
#[derive(Debug)]
pub struct FakeClock {
    now: Mutex<Instant>,
}

impl FakeClock {
    /// A fake clock starting at the current real instant.
    pub fn new() -> Self {
        Self::at(Instant::now())
    }

    /// A fake clock starting at `start`.
    pub fn at(start: Instant) -> Self {
        FakeClock { now: Mutex::new(start) }
    }

    /// Moves the clock forward by `d`.
    pub fn advance(&self, d: Duration) {
        *self.now.lock() += d;
    }

    /// Sets the clock to `t`.
    pub fn set(&self, t: Instant) {
        *self.now.lock() = t;
    }
}

impl Default for FakeClock {
    fn default() -> Self {
        Self::new()
    }
}

impl Clock for FakeClock {
    fn now(&self) -> Instant {
        *self.now.lock()
    }
}
