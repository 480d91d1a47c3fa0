//! The buffers of reads whose records were dropped, kept for the next reads.
//!
//! A read's records are handed to the poll's caller, which drops them on its own thread once
//! it has turned them into what it returns; the next read, on the reading thread, then asked
//! the allocator for the same sizes again (a ~100 KB read buffer and 48 bytes of location per
//! record). Fresh allocations of that size came back cold, or consolidated first, and writing
//! the locations into them took more time than parsing the records. A read takes the buffers
//! dropped reads gave back instead.
//!
//! But not the latest ones: a buffer is handed out again only once [`MIN_AGE`] more of its
//! kind have been given back after it, oldest first. The caller has just read a buffer it
//! drops, so its lines are still in the caller's core's cache, and the reading thread, on
//! another core, must take each line from there before it writes it. Writing a read's bytes
//! and record locations into the buffers the caller last read took about twice as long as
//! into ones it had read 16 reads before, whose lines had gone to the shared cache (a read of
//! 1,000 records of 100 bytes, on two cores: the copy 12.6 µs against 3.6, the locations 35
//! against 21). Reading the buffers cost the caller the same either way.
//!
//! The pool is bounded: at most [`KEPT`] buffers of each kind and [`MAX_POOL_BYTES`] of their
//! capacity, each of at most [`MAX_KEPT_BYTES`] (larger ones, from reads of large batches, go
//! back to the allocator); a full pool lets its oldest go. So it never keeps more than a few
//! MB, however many partitions are read.

use std::collections::VecDeque;
use std::sync::Mutex;

use super::RecordLoc;
use crate::storage::fsutil::{AlignedBuf, PAGE};

/// Buffers of each kind the pool keeps.
pub(super) const KEPT: usize = 16;
/// Buffers of its kind given back after a buffer before it is handed out again: enough reads
/// of ~100 KB for the caller's core to have moved its lines out of its own cache (1 MB of L2
/// on the machine it was measured on).
pub(super) const MIN_AGE: u64 = 12;
/// The largest buffer the pool keeps, in bytes of capacity.
pub(super) const MAX_KEPT_BYTES: usize = 512 << 10;
/// The most capacity the pool keeps of each kind.
pub(super) const MAX_POOL_BYTES: usize = 4 << 20;

/// Dropped buffers of one kind.
struct Pool<T> {
    free: Mutex<Free<T>>,
}

/// What a [`Pool`] holds.
struct Free<T> {
    /// Oldest first: each item with its number among the gives and its capacity in bytes.
    items: VecDeque<(u64, usize, T)>,
    /// Items given so far, kept or not.
    given: u64,
    /// The capacity of `items`, in bytes.
    bytes: usize,
}

impl<T> Pool<T> {
    const fn new() -> Self {
        Pool {
            free: Mutex::new(Free {
                items: VecDeque::new(),
                given: 0,
                bytes: 0,
            }),
        }
    }

    #[cfg(test)]
    fn take(&self) -> Option<T> {
        self.take_if(|_| true)
    }

    /// The oldest item that `fits` and has aged [`MIN_AGE`] gives, if any.
    fn take_if(&self, fits: impl Fn(&T) -> bool) -> Option<T> {
        let mut free = self.free.lock().ok()?;
        let given = free.given;
        let at = free
            .items
            .iter()
            .position(|(number, _, item)| given - number > MIN_AGE && fits(item))?;
        let (_, bytes, item) = free.items.remove(at)?;
        free.bytes -= bytes;
        Some(item)
    }

    /// Keeps `item`, whose allocation takes `bytes`, unless it has none (an empty read's) or
    /// is too large (it still counts as given); a full pool lets its oldest go.
    fn give(&self, item: T, bytes: usize) {
        let Ok(mut free) = self.free.lock() else {
            return;
        };
        let number = free.given;
        free.given += 1;
        if bytes == 0 || bytes > MAX_KEPT_BYTES {
            return;
        }
        // The oldest go until the new one fits, freed once the lock is let go.
        let mut evicted = Vec::new();
        while free.items.len() == KEPT || free.bytes + bytes > MAX_POOL_BYTES {
            let Some((_, oldest, buffer)) = free.items.pop_front() else {
                break;
            };
            free.bytes -= oldest;
            evicted.push(buffer);
        }
        free.bytes += bytes;
        free.items.push_back((number, bytes, item));
        drop(free);
        drop(evicted);
    }
}

static LOCATIONS: Pool<Vec<RecordLoc>> = Pool::new();
static BUFFERS: Pool<AlignedBuf> = Pool::new();

/// An empty vector for the locations of a read of at most `max_records`, with the capacity a
/// dropped read left when that is no more than the read can fill (its footprint counts the
/// capacity: a low-rate consumer's read of one record does not keep a large one alive).
pub(super) fn locations(max_records: usize) -> Vec<RecordLoc> {
    LOCATIONS
        .take_if(|l| holds_at_most(l.capacity(), max_records))
        .unwrap_or_default()
}

/// Whether locations of `capacity` are no more than a read of `max_records` can fill.
fn holds_at_most(capacity: usize, max_records: usize) -> bool {
    capacity <= max_records
}

/// Gives a dropped read's record locations back.
pub(super) fn give_locations(mut locations: Vec<RecordLoc>) {
    let bytes = locations.capacity() * std::mem::size_of::<RecordLoc>();
    locations.clear();
    LOCATIONS.give(locations, bytes);
}

/// A buffer for a read of about `want` bytes: the allocation of a dropped read's when one
/// holds it without wasting more than a quarter, else a new one. A read's footprint (what
/// holding it or reading it ahead is charged) counts the whole allocation, so a pooled buffer
/// much larger than a fresh one (`want` and a page) would put reads that fit
/// `MAX_HELD_BYTES` past it; and a small read, such as a low-rate consumer's, does not keep a
/// large buffer alive.
pub(super) fn buffer(want: usize) -> AlignedBuf {
    let fits = |buf: &AlignedBuf| fits(buf.capacity(), want + PAGE);
    BUFFERS.take_if(fits).unwrap_or_default()
}

/// Whether an allocation of `capacity` bytes holds `need` without wasting more than a quarter
/// of `need`.
fn fits(capacity: usize, need: usize) -> bool {
    (need..=need.saturating_add(need / 4)).contains(&capacity)
}

/// Gives a dropped read's buffer back.
pub(super) fn give_buffer(buf: AlignedBuf) {
    let bytes = buf.capacity();
    BUFFERS.give(buf, bytes);
}

/// Record locations that go back to the pool when dropped.
#[derive(Debug, Default)]
pub(super) struct Locations(pub(super) Vec<RecordLoc>);

impl Drop for Locations {
    fn drop(&mut self) {
        give_locations(std::mem::take(&mut self.0));
    }
}

impl std::ops::Deref for Locations {
    type Target = Vec<RecordLoc>;
    fn deref(&self) -> &Vec<RecordLoc> {
        &self.0
    }
}

impl std::ops::DerefMut for Locations {
    fn deref_mut(&mut self) -> &mut Vec<RecordLoc> {
        &mut self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Gives `pool` [`MIN_AGE`] buffers of `len` bytes: what was given before them may be
    /// handed out again.
    fn age(pool: &Pool<Vec<u8>>, len: usize) {
        for _ in 0..MIN_AGE {
            pool.give(vec![0; len], len);
        }
    }

    #[test]
    fn a_dropped_buffer_is_handed_out_again_once_others_were_given_back_after_it() {
        // A pool of its own: the shared ones serve the other tests' reads meanwhile.
        let pool = Pool::<Vec<u8>>::new();
        pool.give(vec![0; 16], MAX_KEPT_BYTES + 1);
        pool.give(Vec::new(), 0);
        age(&pool, 0);
        assert!(
            pool.take().is_none(),
            "a buffer too large or empty is never kept"
        );
        let kept = vec![0u8; 1000];
        let kept_at = kept.as_ptr();
        pool.give(kept, 1000);
        for _ in 1..MIN_AGE {
            pool.give(vec![0; 1000], 1000);
        }
        assert!(
            pool.take().is_none(),
            "the caller's core may still hold what it gave back last"
        );
        pool.give(vec![0; 1000], 1000);
        assert_eq!(
            pool.take().map(|b| b.as_ptr()),
            Some(kept_at),
            "the oldest comes first"
        );
    }

    #[test]
    fn a_full_pool_lets_its_oldest_go() {
        let pool = Pool::<Vec<u8>>::new();
        for _ in 0..KEPT * 3 {
            pool.give(vec![0; 1000], 1000);
        }
        assert_eq!(pool.free.lock().unwrap().items.len(), KEPT);
        let newest = vec![0u8; 1000];
        let newest_at = newest.as_ptr();
        pool.give(newest, 1000);
        let taken: Vec<*const u8> =
            std::iter::from_fn(|| pool.take().map(|b| b.as_ptr())).collect();
        assert_eq!(taken.len(), KEPT - MIN_AGE as usize);
        assert!(
            !taken.contains(&newest_at),
            "the newest stays until it aged"
        );

        let large = MAX_KEPT_BYTES;
        let pool = Pool::<Vec<u8>>::new();
        for _ in 0..KEPT {
            pool.give(vec![0; large], large);
        }
        let free = pool.free.lock().unwrap();
        assert_eq!(free.items.len(), MAX_POOL_BYTES / large);
        assert_eq!(free.bytes, MAX_POOL_BYTES);
    }

    #[test]
    fn a_small_read_gets_a_buffer_of_its_own() {
        let pool = Pool::<Vec<u8>>::new();
        pool.give(vec![0; 100_000], 100_000);
        age(&pool, 0);
        let small = |b: &Vec<u8>| fits(b.len(), 1000 + PAGE);
        assert!(
            pool.take_if(small).is_none(),
            "a small read gets a buffer of its own"
        );
        let large = |b: &Vec<u8>| fits(b.len(), 90_000 + PAGE);
        assert_eq!(pool.take_if(large).map(|b| b.len()), Some(100_000));
    }

    #[test]
    fn a_pooled_buffer_wastes_at_most_a_quarter_of_itself() {
        // A read's footprint counts its buffer's capacity: a pooled buffer much larger than
        // a fresh one would push a read that fits the held limit past it.
        let need = 100_000;
        assert!(fits(need + need / 4, need));
        assert!(
            !fits(need + need / 2, need),
            "a buffer half as large again as the read is not taken"
        );
        assert!(!fits(need - 1, need));
    }

    #[test]
    fn a_read_takes_no_locations_larger_than_its_record_limit() {
        let pool = Pool::<Vec<RecordLoc>>::new();
        pool.give(Vec::with_capacity(10_000), 10_000 * 48);
        for _ in 0..MIN_AGE {
            pool.give(Vec::new(), 0);
        }
        let small = |l: &Vec<RecordLoc>| holds_at_most(l.capacity(), 1000);
        assert!(
            pool.take_if(small).is_none(),
            "a read of 1000 records never fills 10,000 locations"
        );
        pool.give(Vec::with_capacity(800), 800 * 48);
        for _ in 0..MIN_AGE {
            pool.give(Vec::new(), 0);
        }
        assert_eq!(pool.take_if(small).map(|l| l.capacity()), Some(800));
    }

    #[test]
    fn dropped_locations_come_back_empty() {
        let loc = RecordLoc {
            offset: 7,
            timestamp_ms: 0,
            key: super::super::Span(0, 0),
            value: super::super::Span(0, 0),
            headers: super::super::Span(0, 0),
            header_count: 0,
            source: 0,
        };
        for _ in 0..=MIN_AGE {
            let mut dropped = Vec::with_capacity(1000);
            dropped.push(loc);
            drop(Locations(dropped));
        }
        // Another test's read may have taken them meanwhile: whatever comes is empty.
        assert!(locations(1000).is_empty());
    }
}
