//! CPU time and resident memory of this process, CPU time and context switches of one named
//! thread, and CPU time of the processes of a given name (a local server's).
//!
//! The process's CPU time is the kernel's process CPU clock (`CLOCK_PROCESS_CPUTIME_ID`), to the
//! nanosecond: W11 compares differences of a few milliseconds over runs of a few hundred, which
//! the 10 ms ticks of `/proc/self/stat` cannot resolve. A thread's figures are read from `/proc`
//! (Linux only; `None` where it is missing or unreadable): its CPU time from the `utime` and
//! `stime` fields of `stat` in clock ticks, assumed to be 100 per second (`USER_HZ` on every
//! mainstream Linux), so good to 10 ms.
#![allow(unsafe_code)] // one call of `clock_gettime`, below

use std::time::Duration;

/// Clock ticks per second of `utime`/`stime` (`USER_HZ`).
const TICKS_PER_SEC: u64 = 100;

/// `utime + stime` of a `/proc/.../stat` line, as a duration.
pub fn cpu_of_stat(stat: &str) -> Option<Duration> {
    // The command name (field 2) is in parentheses and may hold spaces: split after the last ')'.
    let rest = &stat[stat.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // After the name: state is field 3, so utime (14) and stime (15) are at 11 and 12.
    let utime: u64 = fields.get(11)?.parse().ok()?;
    let stime: u64 = fields.get(12)?.parse().ok()?;
    Some(Duration::from_millis(
        (utime + stime) * 1000 / TICKS_PER_SEC,
    ))
}

/// `utime + stime + cutime + cstime` of a `/proc/.../stat` line: a process's CPU time with that
/// of its children it has waited for (a server's finished connection processes, say).
fn cpu_with_children_of_stat(stat: &str) -> Option<Duration> {
    let rest = &stat[stat.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // utime, stime, cutime, cstime: fields 14 to 17, at 11 to 14 after the name.
    let mut ticks = 0u64;
    for i in 11..=14 {
        let v: i64 = fields.get(i)?.parse().ok()?;
        ticks += u64::try_from(v).unwrap_or(0);
    }
    Some(Duration::from_millis(ticks * 1000 / TICKS_PER_SEC))
}

/// CPU time (user + system, with that of their children they have waited for) of every process
/// on the machine whose name (`comm`) is `comm`: all of a local PostgreSQL server's processes
/// (`postgres`), say, or a Redis server (`redis-server`). To 10 ms; `None` if there is no such
/// process or `/proc` cannot tell.
pub fn cpu_of_processes(comm: &str) -> Option<Duration> {
    let mut total = Duration::ZERO;
    let mut found = false;
    for entry in std::fs::read_dir("/proc").ok()? {
        let Ok(entry) = entry else { continue };
        let dir = entry.path();
        let is_pid = entry
            .file_name()
            .to_str()
            .is_some_and(|n| n.bytes().all(|b| b.is_ascii_digit()));
        if !is_pid {
            continue;
        }
        // A process may exit between the reads: skip it.
        let Ok(name) = std::fs::read_to_string(dir.join("comm")) else {
            continue;
        };
        if name.trim_end() != comm {
            continue;
        }
        let Some(cpu) = std::fs::read_to_string(dir.join("stat"))
            .ok()
            .and_then(|s| cpu_with_children_of_stat(&s))
        else {
            continue;
        };
        total += cpu;
        found = true;
    }
    found.then_some(total)
}

/// CPU time (user + system) used by this process so far, exited threads included, to the
/// nanosecond (`None` if the clock cannot be read).
pub fn process_cpu() -> Option<Duration> {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable `timespec` for the duration of the call, which is all
    // `clock_gettime` asks; it writes nothing else.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_PROCESS_CPUTIME_ID, &mut ts) };
    let secs = u64::try_from(ts.tv_sec).ok()?;
    let nanos = u32::try_from(ts.tv_nsec).ok()?;
    (rc == 0).then(|| Duration::new(secs, nanos))
}

/// Resident memory of this process (`VmRSS` of `/proc/self/status`), in bytes (`None` where it
/// cannot be read).
pub fn resident_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    vm_rss(&status)
}

/// The `VmRSS` line of a `/proc/<pid>/status` text, in bytes.
fn vm_rss(status: &str) -> Option<u64> {
    let kib: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))?
        .trim()
        .strip_suffix("kB")?
        .trim()
        .parse()
        .ok()?;
    Some(kib * 1024)
}

/// What `/proc` tells about one thread.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ThreadSample {
    /// CPU time (user + system) so far.
    pub cpu: Duration,
    /// Times the thread gave up the CPU of its own accord (went to sleep or blocked): one per
    /// sleep of a tick thread, so an independent count of its wake-ups.
    pub voluntary_switches: u64,
}

/// The first thread of this process whose name (`comm`, at most 15 bytes) is `name`.
pub fn thread_named(name: &str) -> Option<ThreadSample> {
    for entry in std::fs::read_dir("/proc/self/task").ok()? {
        let dir = entry.ok()?.path();
        let comm = std::fs::read_to_string(dir.join("comm")).unwrap_or_default();
        if comm.trim_end() != name {
            continue;
        }
        let cpu = cpu_of_stat(&std::fs::read_to_string(dir.join("stat")).ok()?)?;
        let status = std::fs::read_to_string(dir.join("status")).ok()?;
        let voluntary_switches = status
            .lines()
            .find_map(|l| l.strip_prefix("voluntary_ctxt_switches:"))?
            .trim()
            .parse()
            .ok()?;
        return Some(ThreadSample {
            cpu,
            voluntary_switches,
        });
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_stat_lines() {
        let line = "24591 (a (b) c) S 24587 24587 23094 0 -1 4194304 135 0 0 0 152 3 0 0 20 0 1 0";
        assert_eq!(cpu_of_stat(line), Some(Duration::from_millis(1550)));
        assert_eq!(cpu_of_stat("12 (x) S 1 2"), None);
        assert_eq!(
            cpu_with_children_of_stat(line),
            Some(Duration::from_millis(1550))
        );
        let with_children = "7 (postgres) S 1 7 7 0 -1 4194560 9 0 0 0 10 5 30 7 20 0 1 0";
        assert_eq!(
            cpu_with_children_of_stat(with_children),
            Some(Duration::from_millis(520))
        );
        assert_eq!(cpu_of_processes("no-such-process-name"), None);
    }

    #[test]
    fn parses_resident_memory() {
        assert_eq!(
            vm_rss("Name:\tx\nVmRSS:\t   12345 kB\nVmSwap:\t0 kB\n"),
            Some(12345 * 1024)
        );
        assert_eq!(vm_rss("Name:\tx\n"), None);
        if std::path::Path::new("/proc/self/status").exists() {
            assert!(resident_bytes().is_some_and(|b| b > 0));
        }
    }

    #[test]
    fn reads_this_process_and_a_named_thread() {
        if !std::path::Path::new("/proc/self/stat").exists() {
            return;
        }
        // The CPU clock moves with work done, and never back.
        let start = process_cpu().expect("the process CPU clock");
        let mut spins = 0u64;
        let mut now = start;
        while now < start + Duration::from_millis(1) && spins < 1 << 40 {
            spins = std::hint::black_box(spins + 1);
            if spins.is_multiple_of(4096) {
                let later = process_cpu().expect("the process CPU clock");
                assert!(
                    later >= now,
                    "the CPU clock went back: {now:?} then {later:?}"
                );
                now = later;
            }
        }
        assert!(
            now >= start + Duration::from_millis(1),
            "1 ms of spinning never showed"
        );
        let (tx, rx) = std::sync::mpsc::channel::<()>();
        let t = std::thread::Builder::new()
            .name("procfs-probe".to_owned())
            .spawn(move || rx.recv())
            .unwrap();
        // The kernel learns the name when the thread starts; give it a moment.
        let mut seen = None;
        for _ in 0..100 {
            seen = thread_named("procfs-probe");
            if seen.is_some() {
                break;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        assert!(seen.is_some(), "thread not found by name");
        assert_eq!(thread_named("no-such-thread"), None);
        drop(tx);
        let _ = t.join();
    }
}
