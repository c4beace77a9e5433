//! Per-node timing for generated code built with `CodegenOptions::profile` (`burnc bench
//! --profile`): each node's block adds its wall time to its own counter.
use core::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;
use std::time::Instant;

static START: OnceLock<Instant> = OnceLock::new();

/// Nanoseconds since the first call in this process.
#[inline]
pub fn now_ns() -> u64 {
    START.get_or_init(Instant::now).elapsed().as_nanos() as u64
}

/// Add the time since `t0` (from [`now_ns`]) to `slot`.
#[inline]
pub fn add(slot: &AtomicU64, t0: u64) {
    slot.fetch_add(now_ns().saturating_sub(t0), Ordering::Relaxed);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn add_accumulates_elapsed_time() {
        let slot = AtomicU64::new(0);
        let t0 = now_ns();
        std::thread::sleep(std::time::Duration::from_millis(2));
        add(&slot, t0);
        let first = slot.load(Ordering::Relaxed);
        assert!(first >= 2_000_000, "{first} ns");
        add(&slot, now_ns());
        assert!(slot.load(Ordering::Relaxed) >= first);
    }
}
