//! Never early, on time, at every scale: deadlines across the wheel's levels on the manual clock,
//! both ends of the timer's clock, ticks of every width, ten simulated years, and the real clock
//! (asserting only "not early" and "eventually").

#[path = "../support/mod.rs"]
mod support;

mod clock_edges;
mod manual_clock;
mod real_clock;
mod ticks_and_ends;
mod uptime;
