//! The memory allocator of both binaries: mimalloc, tuned for a small resident set.
//!
//! Measured on SchedulingBasic (5000 nodes, in process): mimalloc schedules 20–25% faster than
//! glibc malloc, mostly because it packs same-sized objects (NodeInfos, PodInfos) into shared
//! pages, so the node walk touches fewer pages and cache lines. Its defaults trade memory for
//! speed; [`configure`] gives back most of it (peak RSS 230 → 189 MiB on that run).

use std::alloc::{GlobalAlloc, Layout};
use std::sync::atomic::{AtomicBool, AtomicIsize, Ordering};

pub use mimalloc::MiMalloc;

/// The global allocator [`install_allocator!`](crate::install_allocator) installs: mimalloc, or
/// the C library's malloc with the `system-allocator` feature, so that heap profilers that
/// interpose malloc (heaptrack, valgrind's massif) see every allocation.
#[cfg(not(feature = "system-allocator"))]
pub type GlobalAllocator = Counting<MiMalloc>;
/// The global allocator [`install_allocator!`](crate::install_allocator) installs.
#[cfg(feature = "system-allocator")]
pub type GlobalAllocator = Counting<std::alloc::System>;

/// The instance of [`GlobalAllocator`].
#[cfg(not(feature = "system-allocator"))]
pub const GLOBAL_ALLOCATOR: GlobalAllocator = Counting(MiMalloc);
/// The instance of [`GlobalAllocator`].
#[cfg(feature = "system-allocator")]
pub const GLOBAL_ALLOCATOR: GlobalAllocator = Counting(std::alloc::System);

/// The environment variable that turns on [`live_bytes`] counting and the periodic memory report
/// (its value: the report interval in milliseconds; see [`crate::memreport`]).
pub const MEMORY_REPORT_ENV: &std::ffi::CStr = c"KSCHED_MEMORY_REPORT";

static COUNTING: AtomicBool = AtomicBool::new(false);
static LIVE: AtomicIsize = AtomicIsize::new(0);

/// An allocator that forwards to `A` and, once [`enable_counting`] ran, keeps the bytes
/// requested and not yet freed (for the memory report: the live heap beside the resident set).
/// Off, it costs one relaxed load per call.
pub struct Counting<A>(pub A);

/// Starts counting live bytes from now on (frees of earlier allocations make the count start
/// below zero; [`live_bytes`] is meant for its changes and its level after start-up).
pub fn enable_counting() {
    COUNTING.store(true, Ordering::Relaxed);
}

/// Bytes allocated and not yet freed since [`enable_counting`] (`None` when counting is off).
pub fn live_bytes() -> Option<isize> {
    COUNTING.load(Ordering::Relaxed).then(|| LIVE.load(Ordering::Relaxed))
}

#[inline]
fn count(delta: isize) {
    if COUNTING.load(Ordering::Relaxed) {
        LIVE.fetch_add(delta, Ordering::Relaxed);
    }
}

// SAFETY: every call is forwarded to `A` unchanged; the wrapper only counts sizes.
unsafe impl<A: GlobalAlloc> GlobalAlloc for Counting<A> {
    #[inline]
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        let p = self.0.alloc(l);
        if !p.is_null() {
            count(l.size() as isize);
        }
        p
    }
    #[inline]
    unsafe fn alloc_zeroed(&self, l: Layout) -> *mut u8 {
        let p = self.0.alloc_zeroed(l);
        if !p.is_null() {
            count(l.size() as isize);
        }
        p
    }
    #[inline]
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        count(-(l.size() as isize));
        self.0.dealloc(p, l)
    }
    #[inline]
    unsafe fn realloc(&self, p: *mut u8, l: Layout, new: usize) -> *mut u8 {
        let q = self.0.realloc(p, l, new);
        if !q.is_null() {
            count(new as isize - l.size() as isize);
        }
        q
    }
}

// Ordinals of `mi_option_e` in the `mimalloc.h` libmimalloc-sys builds (v3), which the crate
// does not bind; `option_ids_match_mimalloc` checks them against their defaults.
const ARENA_EAGER_COMMIT: libmimalloc_sys::mi_option_t = 4;
const PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;

/// Commits arena memory on demand and returns freed pages to the OS at once (instead of
/// after a second), so the resident set follows the live heap. Options set through `MIMALLOC_*`
/// environment variables win.
///
/// It must run before the first allocation, which creates the first arena with the options of
/// that moment, and the Rust runtime allocates before `main`:
/// [`install_allocator!`](crate::install_allocator) registers it as an ELF constructor, as
/// mimalloc initialises itself. So it must not allocate: the environment is read through C
/// `getenv`.
pub extern "C" fn configure() {
    extern "C" {
        fn getenv(name: *const std::ffi::c_char) -> *const std::ffi::c_char;
    }
    // SAFETY: getenv with a NUL-terminated name, before any thread can change the environment.
    if unsafe { !getenv(MEMORY_REPORT_ENV.as_ptr()).is_null() } {
        enable_counting();
    }
    if cfg!(feature = "system-allocator") {
        return;
    }
    let options = [(ARENA_EAGER_COMMIT, c"MIMALLOC_ARENA_EAGER_COMMIT"), (PURGE_DELAY, c"MIMALLOC_PURGE_DELAY")];
    for (option, env) in options {
        // SAFETY: getenv with a NUL-terminated name, before any thread can change the
        // environment; mi_option_set is a plain setter of a process-wide integer option, and
        // the ids are valid (checked by a test).
        unsafe {
            if getenv(env.as_ptr()).is_null() {
                libmimalloc_sys::mi_option_set(option, 0);
            }
        }
    }
}

/// Makes mimalloc the binary's global allocator, configured by [`configure`] before the first
/// allocation. Invoke it once, in the binary's root module.
#[macro_export]
macro_rules! install_allocator {
    () => {
        #[global_allocator]
        static GLOBAL: $crate::allocator::GlobalAllocator = $crate::allocator::GLOBAL_ALLOCATOR;

        #[cfg(target_os = "linux")]
        #[used]
        #[link_section = ".init_array"]
        static CONFIGURE_ALLOCATOR: extern "C" fn() = $crate::allocator::configure;
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counting_follows_allocations_and_frees() {
        // Test processes never call `configure` and their global allocator is the default
        // one, so only this test's calls go through a `Counting`.
        let a = Counting(std::alloc::System);
        assert_eq!(live_bytes(), None, "counting is off until enabled");
        enable_counting();
        let before = live_bytes().unwrap();
        let l = Layout::from_size_align(1000, 8).unwrap();
        // SAFETY: allocations of a non-zero layout, freed with the same layout.
        unsafe {
            let p = a.alloc(l);
            assert_eq!(live_bytes().unwrap() - before, 1000);
            let p = a.realloc(p, l, 3000);
            assert_eq!(live_bytes().unwrap() - before, 3000);
            a.dealloc(p, Layout::from_size_align(3000, 8).unwrap());
        }
        assert_eq!(live_bytes().unwrap(), before);
    }

    #[test]
    fn option_ids_match_mimalloc() {
        // Test processes never call `configure`, so the options hold mimalloc's defaults
        // (unless the environment overrides them).
        if std::env::vars().any(|(k, _)| k.starts_with("MIMALLOC_")) {
            return;
        }
        // SAFETY: plain getters.
        let (eager, purge) = unsafe {
            (libmimalloc_sys::mi_option_get(ARENA_EAGER_COMMIT), libmimalloc_sys::mi_option_get(PURGE_DELAY))
        };
        assert_eq!((eager, purge), (2, 1000), "option ids no longer match mimalloc.h");
    }
}
