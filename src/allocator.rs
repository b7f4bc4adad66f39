//! How this process asks its allocator (mimalloc, `src/main.rs`) to hand memory back.
//!
//! Both settings trade nothing measurable in CPU for peak RSS at high stream counts
//! (bench-overhead/results/HISTORY.md). With another global allocator they act on mimalloc's own, empty,
//! state: no-ops.

use libmimalloc_sys::{mi_collect, mi_option_set, mi_option_t};

/// `mi_option_purge_delay` in mimalloc v3's option enum (libmimalloc-sys names no constant
/// for it); its default in v3 is 1000 (ms), which a test checks.
const MI_OPTION_PURGE_DELAY: mi_option_t = 15;

/// Makes mimalloc return a page to the OS as soon as its blocks are all freed, instead of
/// a second later.
///
/// Why: in a run, memory is freed in bursts (dataset generation's threads, a finished run's
/// workers) while other memory is still being taken; with the delay, both are resident at
/// once. At 10,000 streams × 20,000 requests this took the peak from 96–98 to 91 MiB, with
/// user and system time unchanged at 1000 streams. `MIMALLOC_PURGE_DELAY`, when set, wins.
pub fn purge_freed_pages_at_once() {
    if std::env::var_os("MIMALLOC_PURGE_DELAY").is_none() {
        // SAFETY: sets one integer option; no pointers.
        unsafe { mi_option_set(MI_OPTION_PURGE_DELAY, 0) }
    }
}

/// Hands the memory this thread freed back to the allocator's shared arena and the OS.
///
/// Why: a core thread sits idle between runs, and mimalloc retires a page whose blocks were
/// all freed only when its own thread allocates or collects again, so without this a
/// finished run's worker tasks and buffers (~45 MB at 10,000 streams) stayed with the idle
/// thread while the main thread went on allocating.
pub fn release_freed_pages() {
    // SAFETY: `mi_collect` takes no pointers; it walks only this thread's own heap.
    unsafe { mi_collect(true) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_purge_delay_option_is_the_one_set() {
        if std::env::var_os("MIMALLOC_PURGE_DELAY").is_some() {
            return;
        }
        // SAFETY: reads one integer option.
        let delay = unsafe { libmimalloc_sys::mi_option_get(MI_OPTION_PURGE_DELAY) };
        assert_eq!(
            delay, 1000,
            "option {MI_OPTION_PURGE_DELAY} is not the purge delay"
        );
    }
}
