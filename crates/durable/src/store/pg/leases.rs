//! The lease thread of a node: every third of a lease it beats (its row in `tw_nodes`), renews
//! its leases, and rebalances (the live nodes share the shards evenly); in between it listens for
//! jobs other nodes stored in its shards. Events go to the jobs through a thread of their own, so
//! a load they start never delays a renewal.
//!
//! The protocol's invariants (who may fire a shard's jobs when):
//!
//! 1. A node fires jobs of a shard only while it holds the shard's lease by its own clock: the
//!    lease was renewed (or taken) by a statement sent at `t`, and it is not yet
//!    `t + lease - lease / 10`. The server sets `expires = now() + lease` with its `now()` taken
//!    after `t`; another node may take the shard only once the server's clock passes `expires`.
//!    So the holder stops before anyone else may start, whatever the clocks of the nodes say (it
//!    takes only that time passes at the same rate here and on the server).
//! 2. The delete, retry or burial that ends a run applies only if the lease it ran under (shard,
//!    owner, epoch) still holds on the server, in the same statement. A run that outlived its
//!    lease changes nothing: the next holder runs the job again (the only way a job runs twice
//!    without a crash: across a lease change).
//! 3. Taking a shard bumps its epoch; a node that lost a shard and takes it back loads it anew.
//! 4. A node gives shards away (rebalancing, or leaving) by first ceasing to hold them here (no
//!    more runs start), then clearing their owner on the server.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crossbeam_channel::Sender;
use postgres::fallible_iterator::FallibleIterator;

use super::Shared;
use super::conn::{Conn, pg};
use crate::error::StoreError;
use crate::store::{Event, Events, Lease};

/// The running lease thread.
pub(crate) struct Handle {
    stop: Arc<AtomicBool>,
    thread: JoinHandle<()>,
    delivery: JoinHandle<()>,
}

impl Handle {
    /// Stops the thread: it gives every lease back and leaves, so the other nodes take over at
    /// once.
    pub(crate) fn stop(self) {
        self.stop.store(true, Relaxed);
        let _ = self.thread.join();
        let _ = self.delivery.join();
    }
}

/// Starts the lease thread of `shared`, telling `events` what it holds.
pub(crate) fn start(shared: Arc<Shared>, events: Events) -> Handle {
    let (tx, rx) = crossbeam_channel::unbounded::<Event>();
    let delivery = std::thread::Builder::new()
        .name("tickwheel-durable-events".into())
        .spawn(move || {
            for event in rx {
                events(event);
            }
        })
        .expect("the events thread starts");
    let stop = Arc::new(AtomicBool::new(false));
    let s = stop.clone();
    let thread = std::thread::Builder::new()
        .name("tickwheel-durable-leases".into())
        .spawn(move || {
            let conn = Conn::new(&shared.config);
            Leaser {
                shared,
                events: tx,
                conn,
                listening: false,
            }
            .run(&s);
        })
        .expect("the lease thread starts");
    Handle {
        stop,
        thread,
        delivery,
    }
}

struct Leaser {
    shared: Arc<Shared>,
    events: Sender<Event>,
    conn: Conn,
    /// The connection listens for announcements (lost with it).
    listening: bool,
}

impl Leaser {
    fn run(mut self, stop: &AtomicBool) {
        let every = self.shared.lease / 3;
        let mut next_round = Instant::now();
        let mut backoff = Duration::from_millis(100);
        while !stop.load(Relaxed) {
            let now = Instant::now();
            if now >= next_round {
                match self.round() {
                    Ok(()) => {
                        backoff = Duration::from_millis(100);
                        next_round = now + every;
                    }
                    Err(_) => {
                        // The server is away: leases lapse by themselves here (invariant 1);
                        // try again soon, less and less often.
                        self.listening = false;
                        next_round = now + backoff;
                        backoff = (backoff * 2).min(every);
                    }
                }
            }
            let wait = next_round.saturating_duration_since(Instant::now());
            self.listen(wait.min(Duration::from_millis(200)));
        }
        self.leave();
    }

    fn lease_ms(&self) -> f64 {
        self.shared.lease.as_secs_f64() * 1000.0
    }

    /// One round: listen (again), beat, renew, rebalance.
    fn round(&mut self) -> Result<(), StoreError> {
        let shared = self.shared.clone();
        let q = &shared.sql;
        let node = shared.node.as_str();
        let lease_ms = self.lease_ms();
        let client = self.conn.get()?;
        let count = |n: u64| {
            shared.statements.fetch_add(n, Relaxed);
            shared.lease_statements.fetch_add(n, Relaxed);
        };
        let result = (|| -> Result<(), postgres::Error> {
            if !self.listening {
                client.batch_execute(&format!("LISTEN \"{}\"", q.channel))?;
                self.listening = true;
                // Announcements may have been missed while not listening.
                if !shared.held.lock().is_empty() {
                    let _ = self.events.send(Event::Resync);
                }
            }
            count(4); // heartbeat, renew, live nodes, forget old nodes
            client.execute(&q.heartbeat, &[&node])?;
            let sent = Instant::now();
            let renewed: HashMap<u32, u64> = (client.query(&q.renew, &[&node, &lease_ms])?.iter())
                .map(|r| (r.get::<_, i32>(0) as u32, r.get::<_, i64>(1) as u64))
                .collect();
            let until = sent + shared.lease - shared.lease / 10;
            let lost: Vec<u32> = {
                let mut held = shared.held.lock();
                let lost: Vec<u32> = (held.iter())
                    .filter(|(s, (e, _))| renewed.get(s) != Some(e))
                    .map(|(&s, _)| s)
                    .collect();
                for s in &lost {
                    held.remove(s);
                }
                for (&s, &e) in &renewed {
                    held.insert(s, (e, until));
                }
                lost
            };
            for shard in lost {
                let _ = self.events.send(Event::Lost { shard });
            }
            // Rebalance: an even share for each live node, the shards that do not divide evenly
            // going one each to the first nodes by name (so no live node is left without).
            let live: Vec<String> = (client.query(&q.live_nodes, &[&lease_ms])?.iter())
                .map(|r| r.get(0))
                .collect();
            let target = share(shared.shards, &live, node);
            let held_now = shared.held.lock().len();
            if held_now > target {
                let extra: Vec<i32> = {
                    let mut held = shared.held.lock();
                    let mut mine: Vec<u32> = held.keys().copied().collect();
                    mine.sort_unstable();
                    let extra: Vec<u32> = mine.split_off(target);
                    for s in &extra {
                        held.remove(s); // no run starts from here on (invariant 4)
                    }
                    extra.iter().map(|&s| s as i32).collect()
                };
                for &shard in &extra {
                    let _ = self.events.send(Event::Lost {
                        shard: shard as u32,
                    });
                }
                count(1);
                client.execute(&q.release, &[&node, &extra])?;
            } else if held_now < target {
                let want = (target - held_now) as i64;
                let sent = Instant::now();
                count(1);
                let taken = client.query(&q.acquire, &[&node, &lease_ms, &want])?;
                let until = sent + shared.lease - shared.lease / 10;
                for r in &taken {
                    let lease = Lease {
                        shard: r.get::<_, i32>(0) as u32,
                        epoch: r.get::<_, i64>(1) as u64,
                    };
                    shared.held.lock().insert(lease.shard, (lease.epoch, until));
                    let _ = self.events.send(Event::Held(lease));
                }
            }
            client.execute(&q.forget_nodes, &[&(lease_ms * 10.0)])?;
            Ok(())
        })();
        result.map_err(|e| {
            self.conn.check(&e);
            pg(e)
        })
    }

    /// Waits up to `wait` for announcements, and passes on those of held shards.
    fn listen(&mut self, wait: Duration) {
        if !self.listening {
            std::thread::sleep(wait);
            return;
        }
        let Ok(client) = self.conn.get() else {
            self.listening = false;
            return std::thread::sleep(wait);
        };
        let mut payloads = Vec::new();
        // Until `wait` is up, however many announcements come: the iterator's timeout starts
        // again with each one, and a steady stream would never let the next round (the lease
        // renewals) come (found by W14: every lease lapsed under load).
        let until = Instant::now() + wait;
        let broken = loop {
            let left = until.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break false;
            }
            let mut notes = client.notifications();
            match notes.timeout_iter(left).next() {
                Ok(Some(n)) => payloads.push(n.payload().to_owned()),
                Ok(None) => break false,
                Err(_) => break true,
            }
        };
        if broken || client.is_closed() {
            self.listening = false;
        }
        for payload in payloads {
            self.announce(&payload);
        }
    }

    /// Passes on the jobs of an announcement that lie in shards held here (not this node's own:
    /// its commit placed them already).
    fn announce(&self, payload: &str) {
        let Some((from, mut rest)) = payload.split_once('\n') else {
            return;
        };
        if from == self.shared.node {
            return;
        }
        let held = self.shared.held.lock().clone();
        while let Some(record) = next_record(&mut rest) {
            let (shard, version, deadline, key) = record;
            if held.contains_key(&shard) {
                let _ = self.events.send(Event::Changed {
                    shard,
                    key: key.to_owned(),
                    version,
                    deadline: Some(deadline),
                });
            }
        }
    }

    /// Gives every lease back and removes this node's row, so the others take over at once.
    fn leave(&mut self) {
        self.shared.held.lock().clear();
        let node = self.shared.node.clone();
        if let Ok(client) = self.conn.get() {
            let _ = client.execute(&self.shared.sql.release_all, &[&node]);
            let _ = client.execute(&self.shared.sql.leave, &[&node]);
        }
    }
}

/// How many of `shards` the node `me` should hold among the `live` nodes (sorted by name): an
/// even share, the remainder one each to the first nodes.
fn share(shards: u32, live: &[String], me: &str) -> usize {
    let n = live.len().max(1) as u32;
    let rank = live.iter().position(|id| id == me).unwrap_or(live.len()) as u32;
    (shards / n + u32::from(rank < shards % n)) as usize
}

/// The next `shard version deadline len key\n` record of an announcement.
fn next_record<'a>(rest: &mut &'a str) -> Option<(u32, u64, u64, &'a str)> {
    let mut head = rest.splitn(5, ' ');
    let shard = head.next()?.parse().ok()?;
    let version = head.next()?.parse().ok()?;
    let deadline = head.next()?.parse().ok()?;
    let len: usize = head.next()?.parse().ok()?;
    let tail = head.next()?;
    let key = tail.get(..len)?;
    *rest = tail.get(len + 1..).unwrap_or("");
    Some((shard, version, deadline, key))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_live_node_gets_a_share() {
        // Found by the review of 2026-11-28: each node took the rounded-up share, and 64 shards
        // on 9 nodes left one node with none ([8, 8, 8, 8, 8, 8, 8, 8, 0]).
        for (shards, nodes) in [
            (64u32, 9usize),
            (64, 40),
            (8, 3),
            (1, 2),
            (65_536, 7),
            (5, 5),
        ] {
            let live: Vec<String> = (0..nodes).map(|i| format!("n{i:03}")).collect();
            let shares: Vec<usize> = live.iter().map(|me| share(shards, &live, me)).collect();
            assert_eq!(
                shares.iter().sum::<usize>(),
                shards as usize,
                "{shards} over {nodes}"
            );
            let (lo, hi) = (shares.iter().min().unwrap(), shares.iter().max().unwrap());
            assert!(hi - lo <= 1, "{shards} over {nodes}: {shares:?}");
            assert!(
                *lo > 0 || shards < nodes as u32,
                "{shards} over {nodes}: {shares:?}"
            );
        }
        // A node not (yet) among the live ones takes only what is left over.
        assert_eq!(share(8, &["a".into(), "b".into()], "c"), 4);
    }

    #[test]
    fn announcements_parse_keys_with_any_bytes() {
        let mut rest = "3 17 1000 5 a b\nc\n0 1 2 0 \n9 9 9 2 xy";
        assert_eq!(next_record(&mut rest), Some((3, 17, 1000, "a b\nc")));
        assert_eq!(next_record(&mut rest), Some((0, 1, 2, "")));
        assert_eq!(next_record(&mut rest), Some((9, 9, 9, "xy")));
        assert_eq!(next_record(&mut rest), None);
        let mut bad = "x 1 2 3 abc\n";
        assert_eq!(next_record(&mut bad), None);
        let mut short = "1 1 1 10 abc";
        assert_eq!(next_record(&mut short), None);
    }
}
