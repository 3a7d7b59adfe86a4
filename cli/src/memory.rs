//! Process-wide settings applied before any thread starts: the allocator's arenas, and the
//! size of candle's own thread pool.

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

/// Sizes candle's process-wide pool (the element-wise operations of embedding run there, outside
/// the embedder's own bounded pool) like the embedder: `SHELF_EMBEDDING_THREADS` when set above
/// 0, else all cores but one, so that embedding leaves the API its core. Candle reads
/// `CANDLE_NUM_THREADS` once; an operator's value wins.
pub fn limit_candle_threads() {
    if std::env::var_os("CANDLE_NUM_THREADS").is_some() {
        return;
    }
    let configured = std::env::var("SHELF_EMBEDDING_THREADS")
        .ok()
        .and_then(|v| v.trim().parse::<usize>().ok())
        .filter(|n| *n > 0);
    let threads = configured.unwrap_or_else(|| {
        std::thread::available_parallelism()
            .map_or(1, |n| n.get().saturating_sub(1))
            .max(1)
    });
    // SAFETY: called from `main` before the runtime or any other thread starts, so nothing
    // reads the environment concurrently.
    unsafe {
        std::env::set_var("CANDLE_NUM_THREADS", threads.to_string());
    }
}
