//! Figures of another process read from Linux's /proc: what the memory
//! examples (`idle_rss`, `server_rss`) measure a server child by.

/// Resident memory of process `pid`, in bytes (`/proc/<pid>/statm`, 4 KiB
/// pages).
///
/// # Panics
/// Without Linux's /proc, or if the process is gone.
pub fn resident_bytes(pid: u32) -> u64 {
    let statm = std::fs::read_to_string(format!("/proc/{pid}/statm")).expect("Linux /proc");
    let pages: u64 = statm
        .split_whitespace()
        .nth(1)
        .and_then(|p| p.parse().ok())
        .expect("statm has a resident field");
    pages * 4096
}

/// File descriptors process `pid` has open (0 if it cannot be read).
pub fn open_fds(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd")).map_or(0, |d| d.count())
}
