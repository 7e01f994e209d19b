//! The `tracing` feature: every event the timer promises is emitted, and each hand-off is a
//! span. Built only with `--features tracing` (CI runs it); a subscriber of its own records what
//! arrives from every thread.
#![cfg(feature = "tracing")]

mod support;

use std::sync::{Arc, Mutex};

use support::{MS, SEC};
use tickwheel::{AddError, Isolation, ManualClock, MisfirePolicy, Task, Timer};
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Metadata, Subscriber};

/// Messages of the events, and names of the spans, seen so far.
#[derive(Default)]
struct Seen {
    events: Mutex<Vec<String>>,
    spans: Mutex<Vec<String>>,
}

struct Recorder(Arc<Seen>);

struct Message(String);

impl Visit for Message {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        if field.name() == "message" {
            self.0 = format!("{value:?}");
        }
    }
}

impl Subscriber for Recorder {
    fn enabled(&self, _: &Metadata<'_>) -> bool {
        true
    }
    fn new_span(&self, span: &Attributes<'_>) -> Id {
        let mut spans = self.0.spans.lock().unwrap();
        spans.push(span.metadata().name().to_owned());
        Id::from_u64(spans.len() as u64)
    }
    fn record(&self, _: &Id, _: &Record<'_>) {}
    fn record_follows_from(&self, _: &Id, _: &Id) {}
    fn event(&self, event: &Event<'_>) {
        let mut m = Message(String::new());
        event.record(&mut m);
        self.0.events.lock().unwrap().push(m.0);
    }
    fn enter(&self, _: &Id) {}
    fn exit(&self, _: &Id) {}
}

#[test]
fn panics_isolation_refusals_skips_and_handoffs_are_traced() {
    let seen = Arc::new(Seen::default());
    tracing::subscriber::set_global_default(Recorder(seen.clone())).unwrap();
    let clock = ManualClock::new();
    let timer = Timer::builder()
        .clock(clock.clone())
        .threads(1)
        .max_pending(3)
        .isolation(Isolation::new().threshold(10 * MS).strikes(1).window(SEC))
        .build()
        .unwrap();
    timer
        .add_or_submit(Task::after(MS, || panic!("on purpose")))
        .unwrap();
    let c = clock.clone();
    timer
        .add_or_submit(Task::after(MS, move || c.advance(20 * MS)).class("report"))
        .unwrap();
    let beat = timer
        .add_or_submit(Task::every(MS, || {}).misfire(MisfirePolicy::Skip))
        .unwrap();
    let refused = timer.add_or_submit(Task::after(SEC, || {}));
    assert!(matches!(refused, Err(AddError::Full(_))));
    clock.advance(MS);
    timer.wait_idle();
    clock.advance(10 * MS); // the beat is now 10 periods behind
    timer.wait_idle();
    assert!(beat.cancel());
    let events = seen.events.lock().unwrap().clone();
    for expected in [
        "a task panicked",
        "add refused",
        "class isolated: its tasks run on the slow pool",
        "runs skipped by the misfire policy",
    ] {
        assert!(
            events.iter().any(|e| e == expected),
            "{expected:?} not in {events:?}"
        );
    }
    assert!(seen.spans.lock().unwrap().iter().any(|s| s == "handoff"));
}
