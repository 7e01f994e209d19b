//! W11: the timer's futures against tokio's own timer, measured in a child process.
//!
//! The measurement lives in `benches/futures` (the `w11-futures` binary), a crate outside this
//! workspace so that its tokio is built without `test-util`: this workspace's tokio carries it
//! for tokio-util's `DelayQueue` peer, and with it tokio's clock locks a mutex on every read,
//! which would slow the baseline W11 compares against. This scenario builds that crate (release,
//! this workspace's target directory, its own Cargo.lock), runs it (`--quick` passed through),
//! shows its progress lines as they come, and turns its output ([`wire`]) into the report's
//! tables and target checks: the timeout cost, lateness and hot-loop tables, W11.cpu, W11.hot
//! and W11.p99.

use std::io::{BufRead as _, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use super::{Config, Outcome, Scenario};
use crate::report::wire;

/// W11.
pub(super) struct Futures;

/// The child crate's manifest: `benches/futures/Cargo.toml` of this checkout.
fn manifest() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("futures/Cargo.toml")
}

/// Where cargo puts the child: `CARGO_TARGET_DIR` if set, else this workspace's `target/`, so the
/// dependencies both builds share are compiled once.
fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            Path::new(env!("CARGO_MANIFEST_DIR"))
                .parent()
                .unwrap_or(Path::new(".."))
                .join("target")
        })
}

/// Builds the child (release) and returns its binary.
fn build(progress: &mut dyn FnMut(&str)) -> Result<PathBuf, String> {
    // The cargo that runs us, when it does (`cargo run` sets CARGO), else the one on the PATH.
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let (manifest, target) = (manifest(), target_dir());
    progress(&format!(
        "W11 building {} (release; tokio without test-util)",
        manifest.display()
    ));
    let status = Command::new(&cargo)
        // Quiet: the report's progress line says what is happening; errors and warnings still show.
        .args(["build", "--release", "--quiet", "--manifest-path"])
        .arg(&manifest)
        .arg("--target-dir")
        .arg(&target)
        .stdout(Stdio::null())
        .status()
        .map_err(|e| format!("running {}: {e}", Path::new(&cargo).display()))?;
    if !status.success() {
        return Err(format!("building {} failed ({status})", manifest.display()));
    }
    Ok(target
        .join("release")
        .join(format!("w11-futures{}", std::env::consts::EXE_SUFFIX)))
}

/// Runs the child and reads its report.
fn run_child(quick: bool, progress: &mut dyn FnMut(&str)) -> Result<Outcome, String> {
    let bin = build(progress)?;
    let mut cmd = Command::new(&bin);
    if quick {
        cmd.arg("--quick");
    }
    let mut child = cmd
        .stdout(Stdio::piped())
        .spawn()
        .map_err(|e| format!("running {}: {e}", bin.display()))?;
    let stdout = child.stdout.take().ok_or("the child's stdout")?;
    let mut reader = wire::Reader::new();
    let mut failed = None;
    for line in BufReader::new(stdout).lines() {
        let line = line.map_err(|e| format!("reading the child's output: {e}"))?;
        match reader.line(&line) {
            Ok(Some(msg)) => progress(&msg),
            Ok(None) => {}
            // Read on to the end, so the child is not stopped by a full pipe before it exits.
            Err(e) => failed = failed.or(Some(e)),
        }
    }
    let status = child
        .wait()
        .map_err(|e| format!("waiting for the child: {e}"))?;
    if let Some(e) = failed {
        return Err(format!("{}: {e}", bin.display()));
    }
    if !status.success() {
        return Err(format!("{} failed ({status})", bin.display()));
    }
    Ok(reader.finish())
}

impl Scenario for Futures {
    fn id(&self) -> &'static str {
        "W11"
    }

    fn title(&self) -> &'static str {
        "futures: timeout and sleep under tokio (built without test-util), against tokio's own timer"
    }

    fn run(&self, cfg: &Config, progress: &mut dyn FnMut(&str)) -> Outcome {
        // Like every workload's own verification: a W11 that cannot run stops the program.
        run_child(cfg.quick, progress).unwrap_or_else(|e| panic!("W11: {e}"))
    }
}
