# Recipes are the commands CI runs (see .ci/run), so anyone can reproduce CI locally.

default: test

# The README's test command.
test:
    cargo test --workspace

# Formatting and lints, as CI checks them; also W11's crate, benches/futures (outside the
# workspace, so that its tokio is built without test-util).
lint:
    cargo fmt --all --check
    cargo fmt --manifest-path benches/futures/Cargo.toml --check
    cargo clippy --workspace --all-targets -- -D warnings
    cargo clippy --manifest-path benches/futures/Cargo.toml --target-dir target --all-targets -- -D warnings

# The main job, as the README gives it: every workload, quick mode.
main:
    cargo run --release -p wheel-benches --bin wheelbench -- --quick

# The earlier main job: 6 million timers through the bare wheel in virtual time.
demo:
    cargo run --release -p tickwheel-wheel --example demo

# The comparative benchmark program, full mode: writes docs/benchmarks.md and its charts (docs/*.svg).
bench:
    cargo run --release -p wheel-benches --bin wheelbench

# Quick mode (under a minute), as CI runs it; prints the tables, writes nothing.
bench-quick:
    cargo run --release -p wheel-benches --bin wheelbench -- --quick --no-write

# Criterion benches with HTML reports (target/criterion).
criterion:
    cargo bench -p wheel-benches

# Model checking with loom, deeper than CI: at most 4 preemptions per interleaving (hours per
# model for the longest). Each model runs in its own process and keeps a checkpoint, so running
# it again after a stop goes on where it was (scripts/loom-full says how).
loom preemptions="4":
    scripts/loom-full {{preemptions}}

# The same with at most 3 preemptions per interleaving, as CI runs it (about 27 minutes on 2 cores).
loom-bounded:
    RUSTFLAGS="--cfg loom" LOOM_MAX_PREEMPTIONS=3 cargo test --release -p tickwheel --test loom

# The stress test for minutes (CI runs it for 10 s in `cargo test`). WHEEL_STRESS_SECS overrides.
stress secs="300":
    WHEEL_STRESS_SECS={{secs}} cargo test --release -p tickwheel --test stress -- --nocapture

# The wheel's property test with ten times the cases CI runs, on a seed of your choice.
proptest seed="1" cases="200000":
    WHEEL_QC_SEED={{seed}} WHEEL_QC_CASES={{cases}} cargo test --release -p tickwheel-wheel --test model

# The whole service against its model (random adds, cancels, reschedules from several threads,
# clock moves, shutdowns), with fifty times the cases CI runs, on a seed of your choice.
service-model seed="1" cases="100000":
    SERVICE_QC_SEED={{seed}} SERVICE_QC_CASES={{cases}} cargo test --release -p tickwheel --test exactly_once -- model::

# The durable jobs' crash test, many rounds (CI runs 4): a child process schedules, cancels and
# fires jobs until SIGKILL at a random moment; every acknowledged job must survive.
crash rounds="50":
    DURABLE_CRASH_ROUNDS={{rounds}} cargo test --release -p tickwheel-durable --test crash -- --nocapture

# The durable jobs on PostgreSQL (127.0.0.1:5432, database test; TICKWHEEL_PG overrides): the
# store, leases, fencing, and three node processes with one killed.
pg:
    cargo test -p tickwheel-durable --features postgres --test postgres --test postgres_edges --test failover -- --nocapture

# A job scheduled, a real crash (the process aborts), a reopen: the job fires.
durable-demo:
    cargo run -p tickwheel-durable --example crash_and_reopen

# API documentation for the whole workspace.
doc:
    RUSTDOCFLAGS="-D warnings" cargo doc --workspace --no-deps

# The library crates as crates.io would get them, in publish order (scripts/check-packages).
packages:
    scripts/check-packages

# Everything CI runs, in the same order.
ci:
    bash .ci/run
