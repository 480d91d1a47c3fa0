//! Chained polls: the coordinator sends a caught-up reader's next poll for it, as it answers
//! this one ([`Chain`], [`NextPoll`]).
//!
//! # Why
//! A `RecordStream` reads on the application's thread; its group's coordinator and
//! partitions run on an I/O thread. At a trickle each record ends a poll, and the stream's
//! next poll reached that thread after it had gone back to sleep: two wake-ups of the I/O
//! thread per record (the produce's, then the poll's), each costing more CPU than the work
//! it did. A chained poll is sent from the I/O thread while it is awake, as the answer
//! leaves: the next record's write finds it already waiting, and the stream awaits its
//! answer without sending anything.
//!
//! # Bounds
//! A chained poll is one more poll of the member, and heartbeats as one, so it must not
//! outlive a reader that stopped reading: the coordinator chains after a chained poll only
//! if the reader was awaiting it by the time it was answered ([`NextPoll::taken`]). A reader
//! that stops polling therefore leaves at most one answer unread, and its member's liveness
//! lasts at most one poll's wait longer than without chaining. Only answers that found no
//! backlog chain (fewer records than asked for, in the poll's own generation): under a
//! backlog the reader sends its next poll ahead itself.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use actix::prelude::*;

use super::{ConsumerPollGroup, FetchedBatch, GroupCoordinatorActor, PollPause};
use crate::partition::Fetched;

/// Whether a [`ConsumerPollGroup`]'s answer carries the member's next poll, already sent.
#[derive(Debug, Default, Clone)]
pub enum Chain {
    /// No: the member sends its own polls (a `Consumer`, a push subscription).
    #[default]
    Off,
    /// The member's own poll: chain after it.
    Ask,
    /// A poll the coordinator chained: chain after it only if the member awaits it by the
    /// time it is answered (its [`NextPoll::taken`]).
    After(Arc<AtomicBool>),
}

/// The member's next poll, sent by the coordinator as it answered this one (see the module
/// docs). It reads from `positions` in `generation`: the poll's own positions with the
/// answered partition's moved past its records. A reader whose positions are still those
/// awaits `reply` instead of sending a poll, and sets `taken` as it starts to; otherwise it
/// drops it (the poll runs out unread, and chains no further).
pub struct NextPoll {
    pub generation: u64,
    pub positions: BTreeMap<u32, u64>,
    /// Set by the reader when it starts to await `reply`: only then does the coordinator
    /// chain after `reply`'s poll.
    pub taken: Arc<AtomicBool>,
    pub reply: Request<GroupCoordinatorActor, ConsumerPollGroup>,
}

impl std::fmt::Debug for NextPoll {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NextPoll")
            .field("generation", &self.generation)
            .field("positions", &self.positions)
            .finish_non_exhaustive()
    }
}

/// What a poll that may chain keeps to send the next one (made when the poll arrives).
pub(super) struct Chainer {
    coordinator: Addr<GroupCoordinatorActor>,
    member: String,
    generation: u64,
    positions: BTreeMap<u32, u64>,
    max_records: usize,
    wait: Duration,
    /// `None` for the member's own poll.
    after: Option<Arc<AtomicBool>>,
}

impl Chainer {
    /// For `poll`, when it asks to chain and may wait (a poll that does not wait answers at
    /// once: nothing to save).
    pub(super) fn for_poll(
        poll: &ConsumerPollGroup,
        coordinator: Addr<GroupCoordinatorActor>,
    ) -> Option<Chainer> {
        let after = match &poll.chain {
            Chain::Off => return None,
            Chain::Ask => None,
            Chain::After(taken) => Some(taken.clone()),
        };
        Some(Chainer {
            coordinator,
            member: poll.member.clone(),
            generation: poll.generation,
            positions: poll.positions.clone(),
            max_records: poll.max_records,
            wait: poll.wait?,
            after,
        })
    }

    /// The next poll after `batch`, sent now, when it answered from the poll's positions
    /// (same generation) with fewer records than asked for, and the member awaited this
    /// poll (when the coordinator chained it).
    pub(super) fn next_after(self, batch: &FetchedBatch) -> Option<Box<NextPoll>> {
        let fetched: &Fetched = batch.fetched.as_ref()?;
        let caught_up = fetched.records.len() < self.max_records;
        let kept_up = self.after.is_none_or(|taken| taken.load(Ordering::Acquire));
        if !caught_up || !kept_up || batch.assignment.generation != self.generation {
            return None;
        }
        let last = fetched.records.last_offset()?;
        let mut positions = self.positions;
        positions.insert(fetched.partition, last.saturating_add(1));
        let taken = Arc::new(AtomicBool::new(false));
        let reply = self.coordinator.send(ConsumerPollGroup {
            member: self.member,
            generation: self.generation,
            positions: positions.clone(),
            max_records: self.max_records,
            wait: Some(self.wait),
            pause: PollPause {
                wait_first: true,
                ..PollPause::default()
            },
            chain: Chain::After(taken.clone()),
        });
        Some(Box::new(NextPoll {
            generation: self.generation,
            positions,
            taken,
            reply,
        }))
    }
}
