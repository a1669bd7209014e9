//! How much memory a reader may fill from one file: a share of what the machine has free, so a
//! small file that declares gigabytes (a zip bomb, a huge image) is refused with an error before
//! it is inflated, instead of taking the machine.

/// A data set read into memory may take at most this fraction (1 / divisor) of the memory
/// [`available_memory`] reports. Four: building a data set holds the file's decompressed arrays
/// and the converted images together (up to three copies of the pixels at the peak, for
/// channels-last images), and the rest of the process (the model, the batch loader) needs room
/// too.
pub const MEMORY_SHARE_DIVISOR: u64 = 4;

/// The memory this process can still fill, in bytes, and what bounds it: the least of Linux's
/// `MemAvailable` (from `/proc/meminfo`) and the address space left under this process's soft
/// limit (`ulimit -v`, `prlimit --as`: the limit from `/proc/self/limits` less `VmSize` from
/// `/proc/self/status`). `None` where neither can be read (not Linux). The one reading of the
/// machine's memory: the readers' budget and the command line's run estimate both use it.
pub fn memory_left() -> Option<(u64, String)> {
    let read = |file: &str| std::fs::read_to_string(file).unwrap_or_default();
    let free = proc_kb(&read("/proc/meminfo"), "MemAvailable:")
        .map(|b| (b, "available on this machine (MemAvailable)".to_string()));
    let left = address_space_limit(&read("/proc/self/limits")).map(|limit| {
        let used = proc_kb(&read("/proc/self/status"), "VmSize:").unwrap_or(0);
        (
            limit.saturating_sub(used),
            format!("left under this process's address-space limit of {limit} bytes"),
        )
    });
    match (free, left) {
        (Some(f), Some(l)) => Some(if l.0 < f.0 { l } else { f }),
        (f, l) => f.or(l),
    }
}

/// The bytes [`memory_left`] reports, without the reason.
pub fn available_memory() -> Option<u64> {
    memory_left().map(|(bytes, _)| bytes)
}

/// A `/proc` file's value of `key` in bytes: `/proc/meminfo`'s `MemAvailable:  123 kB`,
/// `/proc/self/status`'s `VmSize:  123 kB`.
fn proc_kb(text: &str, key: &str) -> Option<u64> {
    let line = text.lines().find(|l| l.starts_with(key))?;
    let kb: u64 = line[key.len()..].split_whitespace().next()?.parse().ok()?;
    kb.checked_mul(1024)
}

/// The soft address-space limit (`ulimit -v`, `prlimit --as`) in `/proc/self/limits`' text, if
/// one is set: "Max address space   <soft>   <hard>   bytes"; the soft limit is the one enforced.
fn address_space_limit(limits: &str) -> Option<u64> {
    let line = limits
        .lines()
        .find(|l| l.starts_with("Max address space"))?;
    line["Max address space".len()..]
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// The most bytes one data set read into memory may take: [`available_memory`] divided by
/// [`MEMORY_SHARE_DIVISOR`], and never more than `ceiling` (the reader's own absolute cap, also
/// used where the available memory is unknown).
pub fn memory_budget(ceiling: u64) -> u64 {
    available_memory().map_or(ceiling, |m| (m / MEMORY_SHARE_DIVISOR).min(ceiling))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proc_files_are_read() {
        let meminfo = "MemTotal:       24000000 kB\nMemAvailable:    2000 kB\n";
        assert_eq!(proc_kb(meminfo, "MemAvailable:"), Some(2000 * 1024));
        assert_eq!(proc_kb(meminfo, "VmSize:"), None);
        let limits = "Limit                     Soft Limit           Hard Limit           Units\n\
                      Max address space         1073741824           1073741824           bytes\n";
        assert_eq!(address_space_limit(limits), Some(1 << 30));
        let unlimited =
            "Max address space         unlimited            unlimited            bytes\n";
        assert_eq!(address_space_limit(unlimited), None);
    }

    #[test]
    fn the_budget_is_a_share_of_the_available_memory_below_the_ceiling() {
        let ceiling = 1 << 40;
        let budget = memory_budget(ceiling);
        assert!(budget <= ceiling);
        // The memory available moves between two reads: compared within a margin.
        if let Some(m) = available_memory() {
            assert!(m > 0);
            let share = m / MEMORY_SHARE_DIVISOR;
            assert!(
                budget.abs_diff(share) <= share / 10 + (64 << 20),
                "{budget} {share}"
            );
        }
        assert_eq!(memory_budget(10), 10);
    }
}
