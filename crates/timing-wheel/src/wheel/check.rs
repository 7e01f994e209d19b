//! The invariants of the module docs, checked after every operation by the unit tests.

use std::cmp::Reverse;

use super::{COMPACT_MIN, SETTLE_BATCH, STALE_PER_LIVE, TimingWheel};

impl<T> TimingWheel<T> {
    /// Checks every invariant in the module docs. O(size of the wheel): tests only.
    pub(crate) fn check(&self) {
        let mut records = 0;
        let mut queued = 0;
        for (level, buckets) in self.levels.iter().enumerate() {
            for (slot, b) in buckets.iter().enumerate() {
                let id = ((level as u32) << self.bits) | slot as u32;
                let (mut live, mut marked) = (0, 0);
                assert_eq!(
                    b.marks.len(),
                    b.recs.len().div_ceil(64),
                    "bucket {level}/{slot}: a mark word per 64 records"
                );
                let marks: usize = b.marks.iter().map(|w| w.count_ones() as usize).sum();
                for (i, &s) in b.recs.iter().enumerate() {
                    if b.is_marked(i) {
                        marked += 1;
                        continue;
                    }
                    let e = self.slab.at(s);
                    // Any other record is stale: its entry is vacant, elsewhere, or at another
                    // index.
                    if e.item().is_some() && e.pos() as usize == i && self.locate(e.due()) == id {
                        live += 1;
                    }
                }
                assert_eq!(
                    (marked, marks),
                    (b.stale as usize, b.stale as usize),
                    "bucket {level}/{slot}: every stale record settled, and only those, is marked \
                     (and nothing past the last record)"
                );
                let stale = b.recs.len() - live;
                let unsettled = self
                    .unsettled
                    .iter()
                    .filter(|c| self.locate(c.due) == id)
                    .count();
                assert_eq!(
                    stale,
                    b.stale as usize + unsettled,
                    "stale count of bucket {level}/{slot} ({unsettled} cancels unsettled)"
                );
                assert!(
                    unsettled > 0 || stale < COMPACT_MIN as usize || stale <= STALE_PER_LIVE * live,
                    "bucket {level}/{slot} holds {stale} stale records for {live} live ones"
                );
                assert!(
                    unsettled > 0 || live > 0 || b.recs.is_empty(),
                    "bucket {level}/{slot} holds only stale records"
                );
                records += live;
                if let Some(bits) = self.bitmaps.get(level) {
                    assert_eq!(
                        bits.is_set(slot as u32),
                        !b.recs.is_empty(),
                        "occupancy bit of bucket {level}/{slot}"
                    );
                    let mask = (1u64 << self.bits) - 1;
                    let digit = (self.cur >> (level as u32 * self.bits)) & mask;
                    assert!(
                        b.recs.is_empty() || slot as u64 > digit,
                        "bucket {level}/{slot} at or before the clock's digit (cur {})",
                        self.cur
                    );
                    continue;
                }
                match self.queue.get(&id) {
                    Some((_, &Reverse(start))) => {
                        queued += 1;
                        assert!(!b.recs.is_empty(), "queued bucket {level}/{slot} is empty");
                        assert!(start > self.cur, "queued bucket {level}/{slot} already due");
                    }
                    None => assert!(
                        b.recs.is_empty(),
                        "bucket {level}/{slot} holds records but is not queued"
                    ),
                }
            }
        }
        assert_eq!(
            queued,
            self.queue.len(),
            "the queue names buckets that do not exist"
        );
        for (i, r) in self.overdue.iter().enumerate() {
            let e = self.slab.at(r.slot);
            assert!(e.item().is_some(), "the overdue list names a vacant slot");
            assert_eq!(e.pos() as usize, i, "pos of an overdue entry");
            assert!(e.due() <= self.cur && e.due() <= r.due);
            records += 1;
        }
        assert!(
            self.unsettled.len() < SETTLE_BATCH,
            "unsettled cancels pile up"
        );
        for u in &self.unsettled {
            assert!(u.due > self.cur, "an unsettled cancel of an overdue entry");
        }
        // With `pos` pointing back at each live record, no entry has two: records == len is a
        // bijection.
        assert_eq!(records, self.len, "records != len");
        assert_eq!(
            self.slab.occupied().count(),
            self.len,
            "occupied entries != len"
        );
        // Queue order by level: each level's buckets all expire before the next level's.
        let mut by_level: Vec<(u64, u64)> = vec![(u64::MAX, 0); self.levels.len()];
        for (&id, &Reverse(start)) in self.queue.iter() {
            let l = (id >> self.bits) as usize;
            by_level[l].0 = by_level[l].0.min(start);
            by_level[l].1 = by_level[l].1.max(start);
        }
        let present: Vec<(u64, u64)> = by_level
            .into_iter()
            .filter(|&(min, _)| min != u64::MAX)
            .collect();
        for pair in present.windows(2) {
            assert!(
                pair[0].1 < pair[1].0,
                "levels overlap in the queue: {pair:?}"
            );
        }
    }
}
