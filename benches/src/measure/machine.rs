//! What the figures were measured on, and when: core count, CPU model, memory, UTC date and time;
//! and how fast the host's memory answered at the time ([`memory_latency`]).

use std::hint::black_box;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use crate::rng::Rng;

/// A description of this machine and the moment of the run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Machine {
    /// Logical cores available to this process.
    pub cores: usize,
    /// `model name` from `/proc/cpuinfo`, or "unknown".
    pub cpu: String,
    /// `MemTotal` from `/proc/meminfo`, in MiB (0 if unknown).
    pub mem_mib: u64,
    /// The date and time of the run, UTC, `YYYY-MM-DD HH:MM:SS UTC`.
    pub date: String,
}

impl Machine {
    /// Reads the machine description and the clock.
    pub fn detect() -> Self {
        let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
        let cpu = field(&cpuinfo, "model name").unwrap_or_else(|| "unknown".to_owned());
        let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
        let mem_mib = field(&meminfo, "MemTotal")
            .and_then(|v| v.trim_end_matches("kB").trim().parse::<u64>().ok())
            .map_or(0, |kb| kb / 1024);
        let secs = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        Machine {
            cores: std::thread::available_parallelism().map_or(1, |n| n.get()),
            cpu,
            mem_mib,
            date: utc_string(secs),
        }
    }

    /// One line: cores, CPU, memory, date.
    pub fn summary(&self) -> String {
        format!(
            "{} cores, {}, {} MiB RAM; {}",
            self.cores, self.cpu, self.mem_mib, self.date
        )
    }
}

/// Nanoseconds per load of a chain of dependent loads at random places in `mib` MiB (at least
/// 1): the latency of this host's memory as the run found it, page walks included (4 KiB pages
/// here). The wheel's workloads are bound by it (a cold bucket, a cold slot per timer), and on a
/// shared virtual machine it moves: one binary of 2026-11-25 measured W1 at 76 ns per timer that
/// day and at 115-215 ns on 2026-11-27. The report gives this figure at the start and the end of
/// the run, so a reader can tell a slow host from slow code. `steps` loads are timed, after
/// `steps` untimed ones (up to the chain's length) to fault its pages in and warm what caches it.
pub fn memory_latency(mib: usize, steps: usize) -> f64 {
    let n = ((mib.max(1) << 20) / std::mem::size_of::<u32>()).min(u32::MAX as usize);
    let next = chain(n, &mut Rng::new(0x6d65_6d6c_6174));
    let mut at = 0u32;
    for _ in 0..n.min(steps) {
        at = next[at as usize];
    }
    let start = Instant::now();
    for _ in 0..steps {
        at = next[black_box(at) as usize];
    }
    let ns = start.elapsed().as_nanos() as f64 / steps.max(1) as f64;
    black_box(at);
    ns
}

/// One cycle through all of `0..n` in random order: `next[i]` is where the chain goes after
/// `i`. The indexes are shuffled (Fisher-Yates) and each links to the one after it in that
/// order, the last back to the first, so a walk from anywhere visits every index before it
/// repeats, and each step's address depends on the load before it.
fn chain(n: usize, rng: &mut Rng) -> Vec<u32> {
    let mut order: Vec<u32> = (0..n as u32).collect();
    for i in (1..n).rev() {
        let j = rng.range(0, i as u64) as usize;
        order.swap(i, j);
    }
    let mut next = vec![0u32; n];
    for (k, &i) in order.iter().enumerate() {
        next[i as usize] = order[(k + 1) % n];
    }
    next
}

/// The value of the first `key : value` line of a `/proc` file.
fn field(text: &str, key: &str) -> Option<String> {
    text.lines()
        .find(|l| l.split(':').next().is_some_and(|k| k.trim() == key))
        .and_then(|l| l.split_once(':'))
        .map(|(_, v)| v.trim().to_owned())
}

/// `YYYY-MM-DD HH:MM:SS UTC` for seconds since the Unix epoch (civil-from-days, proleptic
/// Gregorian calendar).
pub fn utc_string(secs: u64) -> String {
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02} {:02}:{:02}:{:02} UTC",
        rem / 3600,
        rem / 60 % 60,
        rem % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn utc_dates() {
        for (secs, want) in [
            (0, "1970-01-01 00:00:00 UTC"),
            (951_782_400, "2000-02-29 00:00:00 UTC"),
            (1_700_000_000, "2023-11-14 22:13:20 UTC"),
            (4_107_542_399, "2100-02-28 23:59:59 UTC"),
        ] {
            assert_eq!(utc_string(secs), want);
        }
    }

    #[test]
    fn the_chain_is_one_cycle_through_every_index() {
        let next = chain(1000, &mut Rng::new(7));
        let mut seen = vec![false; 1000];
        let mut at = 0;
        for _ in 0..1000 {
            assert!(!seen[at], "index {at} visited twice");
            seen[at] = true;
            at = next[at] as usize;
        }
        assert_eq!(at, 0, "back at the start after 1000 steps");
        assert!(memory_latency(1, 1000) > 0.0);
    }

    #[test]
    fn proc_fields() {
        let text = "processor\t: 0\nmodel name\t: Some CPU @ 3GHz\n";
        assert_eq!(
            field(text, "model name").as_deref(),
            Some("Some CPU @ 3GHz")
        );
        assert_eq!(field(text, "missing"), None);
    }
}
