//! What this machine offers, recorded with a `--max-parallel auto` run.

/// Cores available to this process, and memory available (Linux `MemAvailable`; elsewhere
/// an unknown amount counts as plenty, leaving the cores to decide).
pub fn resources() -> (usize, u64) {
    let cores = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1);
    let mem = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|text| {
            text.lines()
                .find(|l| l.starts_with("MemAvailable:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|kib| kib.parse::<u64>().ok())
        })
        .map(|kib| kib * 1024)
        .unwrap_or(u64::MAX);
    (cores, mem)
}
