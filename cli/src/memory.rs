//! Process-wide allocator setting, applied before any thread starts.

/// Caps glibc's malloc arenas at two. glibc gives each thread that allocates under contention
/// its own arena (up to eight per core), and each arena keeps its freed memory: with tokio's
/// workers, the blocking pool and one thread per pooled SQLite connection, `shelf api` and
/// `shelf worker` grew by about 20 MiB of peak RSS together on the peer benchmark for no
/// throughput (docs/PERFORMANCE.md, Throughput). An operator's `MALLOC_ARENA_MAX` still
/// wins: the call is only made when the variable is unset.
pub fn limit_malloc_arenas() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    if std::env::var_os("MALLOC_ARENA_MAX").is_none() {
        // SAFETY: mallopt only sets an allocator parameter; it is called before the runtime
        // starts any thread, and a refused value (return 0) leaves glibc's default in place.
        unsafe {
            libc::mallopt(libc::M_ARENA_MAX, 2);
        }
    }
}
