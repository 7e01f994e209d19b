//! `wheelbench`: runs the comparative workloads and writes `docs/benchmarks.md` with its charts.
//!
//! ```text
//! cargo run --release -p wheel-benches --bin wheelbench -- [--quick] [--n N] [--only W1,W2]
//!     [--out PATH] [--no-write]
//! ```

use std::io::{IsTerminal as _, Write as _};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressStyle};

use wheel_benches::measure::alloc::CountingAlloc;
use wheel_benches::measure::machine::{self, Machine};
use wheel_benches::report::Table;
use wheel_benches::report::svg;
use wheel_benches::scenario::{self, Check, Config, Outcome};

#[global_allocator]
static ALLOC: CountingAlloc = CountingAlloc;

const USAGE: &str = "\
usage: wheelbench [--quick] [--n N] [--only W1,W2,...] [--out PATH] [--no-write]

  --quick      smaller sizes and fewer repetitions (well under two minutes); prints only,
               unless --out is given
  --n N        timers for W1, W3, W5 and live timers for W2 (default 1M; quick 200k / 100k)
  --only LIST  run only these workloads (W1..W14), comma-separated
  --out PATH   where to write the Markdown report (default, full runs only:
               <workspace>/docs/benchmarks.md);
               its charts (SVG) go next to it
  --no-write   print only, write nothing
  -h, --help   this message";

/// Parsed command line.
#[derive(Debug)]
struct Args {
    cfg: Config,
    only: Option<Vec<String>>,
    out: PathBuf,
    write: bool,
}

fn parse(args: &[String]) -> Result<Option<Args>, String> {
    let mut a = Args {
        cfg: Config {
            quick: false,
            n: None,
        },
        only: None,
        out: Path::new(env!("CARGO_MANIFEST_DIR"))
            .parent()
            .unwrap_or(Path::new(".."))
            .join("docs/benchmarks.md"),
        write: true,
    };
    let ids: Vec<&str> = scenario::all().iter().map(|s| s.id()).collect();
    let mut out_given = false;
    let mut it = args.iter();
    while let Some(arg) = it.next() {
        let (flag, inline) = match arg.split_once('=') {
            Some((f, v)) if f.starts_with("--") => (f, Some(v.to_owned())),
            _ => (arg.as_str(), None),
        };
        let mut value = |name: &str| {
            inline
                .clone()
                .or_else(|| it.next().cloned())
                .ok_or_else(|| format!("{name} needs a value"))
        };
        match flag {
            "-h" | "--help" => return Ok(None),
            "--quick" => a.cfg.quick = true,
            "--no-write" => a.write = false,
            "--n" => {
                let v = value("--n")?;
                let n: usize = v
                    .replace('_', "")
                    .parse()
                    .map_err(|_| format!("--n: not a number: {v}"))?;
                if n < 1000 {
                    return Err(format!("--n: at least 1000, got {n}"));
                }
                a.cfg.n = Some(n);
            }
            "--only" => {
                let v = value("--only")?;
                let list: Vec<String> = v
                    .split(',')
                    .map(|s| s.trim().to_uppercase())
                    .filter(|s| !s.is_empty())
                    .collect();
                if let Some(bad) = list.iter().find(|s| !ids.contains(&s.as_str())) {
                    return Err(format!(
                        "--only: unknown workload {bad} (known: {})",
                        ids.join(",")
                    ));
                }
                if list.is_empty() {
                    return Err("--only: empty list".to_owned());
                }
                a.only = Some(list);
            }
            "--out" => {
                a.out = PathBuf::from(value("--out")?);
                out_given = true;
            }
            other => return Err(format!("unknown argument: {other}")),
        }
    }
    // A quick run's figures are not the report's: it leaves the checkout alone unless told where
    // to write.
    if a.cfg.quick && !out_given {
        a.write = false;
    }
    Ok(Some(a))
}

/// A bar over the workloads of a full run, drawn on stderr when it is a terminal (a quick run, or
/// output to a file or CI's log, gets the plain progress lines only).
fn progress_bar(args: &Args, workloads: usize) -> ProgressBar {
    if args.cfg.quick || !std::io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::new(workloads as u64);
    if let Ok(style) =
        ProgressStyle::with_template("{elapsed_precise} [{bar:30}] {pos}/{len} workloads  {msg}")
    {
        bar.set_style(style.progress_chars("=> "));
    }
    bar.enable_steady_tick(Duration::from_millis(200));
    bar
}

fn main() -> ExitCode {
    let raw: Vec<String> = std::env::args().skip(1).collect();
    // W14 runs its nodes as processes of their own: this program again, with a hidden argument.
    if raw.first().map(String::as_str) == Some(scenario::NODE_ARG) {
        return scenario::node_main(&raw[1..]);
    }
    let args = match parse(&raw) {
        Ok(Some(a)) => a,
        Ok(None) => {
            println!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        Err(e) => {
            eprintln!("wheelbench: {e}\n\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    let command = format!(
        "cargo run --release -p wheel-benches --bin wheelbench --{}",
        raw.iter().map(|a| format!(" {a}")).collect::<String>()
    );
    let machine = Machine::detect();
    println!("wheelbench: {command}");
    println!("machine: {}", machine.summary());
    println!("mode: {}", if args.cfg.quick { "quick" } else { "full" });
    if cfg!(debug_assertions) {
        println!("WARNING: debug build; figures are meaningless (use --release)");
    }
    let latency = || {
        let steps = if args.cfg.quick { 500_000 } else { 4_000_000 };
        machine::memory_latency(LATENCY_MIB, steps)
    };
    let latency_before = latency();
    println!(
        "host memory latency: {latency_before:.1} ns per dependent load over {LATENCY_MIB} MiB"
    );
    println!();

    let start = Instant::now();
    let chosen: Vec<_> = scenario::all()
        .into_iter()
        .filter(|s| {
            args.only
                .as_ref()
                .is_none_or(|o| o.iter().any(|id| id == s.id()))
        })
        .collect();
    let bar = progress_bar(&args, chosen.len());
    // Progress lines go above the bar when there is one, else to stderr as they come.
    let log = |line: String| {
        let line = format!("[{:6.1}s] {line}", start.elapsed().as_secs_f64());
        if bar.is_hidden() {
            eprintln!("{line}");
        } else {
            bar.println(line);
        }
    };
    let mut sections: Vec<(String, String, Outcome)> = Vec::new();
    for s in chosen {
        bar.set_message(s.id());
        log(format!("{} {}", s.id(), s.title()));
        let mut progress = |msg: &str| {
            bar.set_message(msg.to_owned());
            log(format!("  {msg}"));
        };
        wheel_benches::measure::alloc::settle(); // the previous workload's frees are not this one's cost
        let outcome = s.run(&args.cfg, &mut progress);
        bar.suspend(|| {
            for t in &outcome.tables {
                println!("{}", t.to_text());
            }
            let _ = std::io::stdout().flush();
        });
        bar.inc(1);
        sections.push((s.id().to_owned(), s.title().to_owned(), outcome));
    }
    bar.finish_and_clear();
    let total = start.elapsed().as_secs_f64();
    let host = Host {
        before: latency_before,
        after: latency(),
    };
    println!("{}", host.summary());
    let checks: Vec<&Check> = sections.iter().flat_map(|(_, _, o)| &o.checks).collect();
    let targets = targets_table(&checks, args.cfg.quick);
    if !checks.is_empty() {
        println!("{}", targets.to_text());
    }
    println!("total time: {total:.1} s");
    println!();
    println!("{}", summary(&sections, &checks, &machine, args.cfg.quick));

    if args.write {
        let md = markdown(
            &command, &machine, &host, &args.cfg, total, &sections, &targets,
        );
        let mut files = vec![(args.out.clone(), md)];
        for chart in sections.iter().flat_map(|(_, _, o)| &o.charts) {
            match svg::render(chart) {
                Ok(doc) => files.push((args.out.with_file_name(chart.file), doc)),
                Err(e) => {
                    eprintln!("wheelbench: {e}");
                    return ExitCode::FAILURE;
                }
            }
        }
        for (path, text) in &files {
            if let Err(e) = write(path, text) {
                eprintln!("wheelbench: {e}");
                return ExitCode::FAILURE;
            }
            println!("wrote {}", path.display());
        }
    }
    ExitCode::SUCCESS
}

fn write(path: &Path, text: &str) -> Result<(), String> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    }
    std::fs::write(path, text).map_err(|e| format!("{}: {e}", path.display()))
}

fn targets_table(checks: &[&Check], quick: bool) -> Table {
    let mut t = Table::new(
        "Targets (docs/workloads.md)",
        &["workload", "target", "measured", "met"],
    );
    for c in checks {
        t.row(vec![
            c.workload.to_owned(),
            c.target.clone(),
            c.measured.clone(),
            match (quick, c.met) {
                // A quick run's samples are too small to judge a target by.
                (true, _) => "not judged (quick)",
                (false, Some(true)) => "yes",
                (false, Some(false)) => "NO",
                (false, None) => "n/a",
            }
            .to_owned(),
        ]);
    }
    t
}

/// The run in a few plain lines: what was measured, where, and which targets it met.
fn summary(
    sections: &[(String, String, Outcome)],
    checks: &[&Check],
    machine: &Machine,
    quick: bool,
) -> String {
    let ids: Vec<&str> = sections.iter().map(|(id, _, _)| id.as_str()).collect();
    let mut s = format!(
        "Summary: {} workload{} ({}; defined in docs/workloads.md), ours against the baselines \
         in the same run, on {}.",
        ids.len(),
        if ids.len() == 1 { "" } else { "s" },
        ids.join(", "),
        machine.summary()
    );
    if quick {
        s.push_str(
            " A quick run: every result was checked (nothing lost, doubled or early), but its \
             samples are too small to judge the targets, and it judges none; the full run \
             (without --quick) does, in docs/benchmarks.md.",
        );
        return s;
    }
    let judged: Vec<&&Check> = checks.iter().filter(|c| c.met.is_some()).collect();
    let missed: Vec<String> = (judged.iter())
        .filter(|c| c.met == Some(false))
        .map(|c| format!("{} {} (measured {})", c.workload, c.target, c.measured))
        .collect();
    s.push_str(&format!(
        " Targets met: {} of {} judged ({} not judged: a size not run, or a figure below its \
         method's resolution).",
        judged.len() - missed.len(),
        judged.len(),
        checks.len() - judged.len()
    ));
    if !missed.is_empty() {
        s.push_str(&format!(" Missed: {}.", missed.join("; ")));
    }
    s
}

/// How much memory the host's memory latency test walks (see `machine::memory_latency`): far
/// more than any cache of the machines this runs on.
const LATENCY_MIB: usize = 64;

/// The host's memory latency at the start and the end of the run.
struct Host {
    before: f64,
    after: f64,
}

impl Host {
    fn summary(&self) -> String {
        format!(
            "host memory latency (a chain of dependent loads at random places in {LATENCY_MIB} MiB, \
             the cost that bounds the wheel's workloads; it moves with the host's load): \
             {:.1} ns per load at the start of the run, {:.1} ns at the end",
            self.before, self.after
        )
    }
}

fn markdown(
    command: &str,
    machine: &Machine,
    host: &Host,
    cfg: &Config,
    total: f64,
    sections: &[(String, String, Outcome)],
    targets: &Table,
) -> String {
    let mut md = String::from("# Benchmarks\n\n");
    let checks: Vec<&Check> = sections.iter().flat_map(|(_, _, o)| &o.checks).collect();
    md.push_str(&summary(sections, &checks, machine, cfg.quick));
    md.push_str("\n\n");
    md.push_str(
        "Generated by `wheelbench` (crate `benches/`); do not edit by hand. Every figure below was \
         measured in the same run. W1–W5 run in virtual time (no clock reads, no sleeping), best of \
         a few repetitions; W6–W8 drive the threaded `Timer` service on the real clock. Every ratio \
         is baseline time / ours (> 1: ours is faster). Each workload verifies its own results and \
         aborts on any miscount, lost task or early fire.\n\n",
    );
    md.push_str(&format!("- command: `{command}`\n"));
    md.push_str(&format!(
        "- mode: {}\n",
        if cfg.quick { "quick" } else { "full" }
    ));
    md.push_str(&format!("- machine: {}\n", machine.summary()));
    md.push_str(&format!("- {}\n", host.summary()));
    md.push_str(&format!("- total run time: {total:.1} s\n\n"));
    md.push_str("## Targets\n\n");
    md.push_str(
        &targets
            .to_markdown()
            .replacen("### Targets (docs/workloads.md)\n\n", "", 1),
    );
    for (id, title, o) in sections {
        md.push_str(&format!("\n## {id}: {title}\n\n"));
        for t in &o.tables {
            md.push_str(&t.to_markdown());
            md.push('\n');
        }
        for c in &o.charts {
            md.push_str(&format!("![{}]({})\n", c.title, c.file));
        }
    }
    md
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(s: &str) -> Vec<String> {
        s.split_whitespace().map(str::to_owned).collect()
    }

    #[test]
    fn parses_flags() {
        let a = parse(&args("--quick --n 5000 --only w1,W3 --no-write"))
            .unwrap()
            .unwrap();
        assert!(a.cfg.quick && !a.write);
        assert_eq!(a.cfg.n, Some(5000));
        assert_eq!(a.only, Some(vec!["W1".to_owned(), "W3".to_owned()]));
        assert!(parse(&args("--help")).unwrap().is_none());
        assert!(
            !parse(&args("--quick")).unwrap().unwrap().write,
            "quick writes nothing"
        );
        assert!(parse(&args("--quick --out q.md")).unwrap().unwrap().write);
        assert!(
            parse(&args("")).unwrap().unwrap().write,
            "a full run writes the report"
        );
        let service = parse(&args("--only W6,w7,W8")).unwrap().unwrap();
        assert_eq!(service.only.unwrap(), ["W6", "W7", "W8"]);
        assert!(
            parse(&args("--out=x.md"))
                .unwrap()
                .unwrap()
                .out
                .ends_with("x.md")
        );
    }

    #[test]
    fn rejects_bad_arguments() {
        for bad in [
            "--n",
            "--n ten",
            "--n 5",
            "--only W15",
            "--only ,",
            "--frobnicate",
        ] {
            assert!(parse(&args(bad)).is_err(), "{bad}");
        }
    }
}
