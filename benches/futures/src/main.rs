//! `w11-futures`: W11 of `wheelbench`, the timer's futures against tokio's own timer, in a
//! process whose tokio is built without `test-util` (see this crate's Cargo.toml for why).
//!
//! ```text
//! cargo run --release --manifest-path benches/futures/Cargo.toml -- [--quick]
//! ```
//!
//! `wheelbench --only W11` builds and runs it; it writes its progress, tables and target checks
//! to stdout in `wheel_benches::report::wire`'s line protocol, which `wheelbench` turns into the
//! report's W11 section. Both sides of every comparison run in this one binary, so ours and
//! tokio's are built alike.
//!
//! | module | tables |
//! |--------|--------|
//! | `cost` | timeout cost (CPU, peak bytes) under a 2-worker runtime; sleep lateness |
//! | `hot` | the hot loop: ns and CPU per operation, ours and tokio's, on a current-thread runtime |

mod cost;
mod hot;

use std::process::ExitCode;

use wheel_benches::measure::alloc::CountingAlloc;
use wheel_benches::report::{Table, wire};

// W11's peak-bytes column counts what the heap holds: the same counting allocator as wheelbench.
#[global_allocator]
static ALLOC: CountingAlloc = CountingAlloc;

/// What a part of W11 measured: its tables, and its target checks as (key in wheel-benches'
/// `report::targets`, the figure, whether met: `None` when the run cannot tell).
#[derive(Debug, Default)]
pub(crate) struct Report {
    /// Tables, in the report's order.
    pub(crate) tables: Vec<Table>,
    /// Target checks.
    pub(crate) checks: Vec<(&'static str, String, Option<bool>)>,
}

fn main() -> ExitCode {
    let mut quick = false;
    for arg in std::env::args().skip(1) {
        match arg.as_str() {
            "--quick" => quick = true,
            other => {
                eprintln!("w11-futures: unknown argument {other:?} (usage: w11-futures [--quick])");
                return ExitCode::from(2);
            }
        }
    }
    // stdout is the protocol: progress lines go there too, so wheelbench shows them as they come
    // (Rust's stdout is line-buffered, and every record ends its line).
    let mut progress = |msg: &str| print!("{}", wire::progress(msg));
    // The cost part's timer and runtime are dropped before the hot loop starts: their threads
    // would otherwise share the CPU clock the hot loop reads.
    let cost = cost::run(quick, &mut progress);
    let hot = hot::run(quick, &mut progress);
    for part in [cost, hot] {
        for t in &part.tables {
            print!("{}", wire::table(t));
        }
        for (key, measured, met) in &part.checks {
            print!("{}", wire::check(key, measured, *met));
        }
    }
    ExitCode::SUCCESS
}
