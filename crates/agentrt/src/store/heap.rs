//! The process's allocator, tuned for a store that commits all day.
//!
//! Inside a write transaction SQLite copies each page a statement changes
//! into a statement journal held in memory, in chunks of about 1 KiB, and
//! frees the chunks when the statement ends. On the writer thread (a glibc
//! arena of its own) that memory sits at the top of the heap, so glibc
//! hands it back to the kernel after nearly every statement (`madvise`)
//! and takes it back on the next one: page faults, and on a virtual
//! machine an inter-processor interrupt each time. Measured on the proxy's
//! benchmark, keeping it cut the overhead per call at `synchronous=NORMAL`
//! from about 1.0 ms to about 0.75 ms (see docs/performance.md).

/// Above this much free memory at the top of a heap, glibc trims it.
const TRIM_THRESHOLD: i32 = 64 << 20;

/// Tells glibc's allocator to keep up to 64 MiB of freed memory at the top
/// of each heap instead of handing it back to the kernel after every
/// statement. For a long-lived process that writes through a store (a
/// server: `agentrt-proxy` calls it first thing). It changes the whole
/// process's allocator, so only a program calls it, never a library; a
/// no-op where the C library is not glibc. Returns whether the setting
/// was taken.
///
/// ```
/// let taken = agentrt::store::retain_freed_heap();
/// assert_eq!(taken, cfg!(all(target_os = "linux", target_env = "gnu")));
/// ```
pub fn retain_freed_heap() -> bool {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        // SAFETY: `mallopt` only records the setting; it may be called at
        // any time, from any thread.
        unsafe { libc::mallopt(libc::M_TRIM_THRESHOLD, TRIM_THRESHOLD) == 1 }
    }
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    {
        false
    }
}
