//! A poll's waits at its partitions ([`WaitForData`]), and the ones a member's next poll
//! takes over ([`KeptWaits`]).
//!
//! # Why waits are kept
//! A caught-up member's poll waits at each of its partitions, and the first write answers
//! it. The waits at the other partitions are still parked there, unanswered, and still wait
//! for what the member's next poll will wait for: the same partitions, from the same
//! positions (only the answered partition's position moves). So instead of dropping them
//! and sending each partition a new `WaitForData`, the poll leaves them to its member's next
//! poll, which sends a wait only to the partition that answered. At a trickle over four
//! partitions that is one message per poll instead of four.
//!
//! # When a kept wait is taken over
//! Only by a poll of the same member, in the same generation, for the same number of
//! records, at the same partition and from the same explicit position (a wait from the
//! committed offset, `None`, is always sent again: a commit moved backwards could have put
//! records there without a write, and a new wait checks). A poll that wakes a blocking
//! caller early (`PollPause::early_wake`) keeps none: its early wake-ups are its own. A
//! rebalance or a restart of the coordinator forgets them all; a wait no poll takes over is
//! dropped, and its partition discards it at its next registration or write.
//!
//! A kept wait that was answered meanwhile (a write or a restart of its partition while the
//! member was busy) is not taken over: the next poll sends a new wait there, which answers
//! at once where there is data, as it did before waits were kept. Between polls the round's
//! `claimed` flag is set (by the wait that answered), so such a write reads nothing for a
//! poll that may never come; the next round clears it, so its first write reads for it
//! again.

use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::task::Poll;

use futures::channel::oneshot;
use futures::future::poll_fn;
use futures::Future;

use super::{PollPlan, Woken};
use crate::actors::partition::WaitForData;
use crate::error::Result;
use crate::partition::Fetched;
use crate::wait::EarlyWake;

/// A member's waits left by its last poll (see the module docs), shared between the
/// coordinator, which hands the slot to each of the member's polls, and those polls.
pub(super) type KeptSlot = Arc<Mutex<Option<KeptWaits>>>;

/// The waits a poll left parked, for its member's next poll.
#[derive(Debug)]
pub(super) struct KeptWaits {
    generation: u64,
    max_records: usize,
    /// Shared by all the waits of a round (see [`WaitForData::claimed`]).
    claimed: Arc<AtomicBool>,
    waits: Vec<ParkedWait>,
}

/// One partition's wait: where it waits from, and its answer to come.
#[derive(Debug)]
pub(super) struct ParkedWait {
    partition: u32,
    from: Option<u64>,
    woken: oneshot::Receiver<Result<Option<Fetched>>>,
}

/// The waits of one round of a poll, at every target.
pub(super) struct WaitRound {
    claimed: Arc<AtomicBool>,
    waits: Vec<ParkedWait>,
}

impl PollPlan {
    /// A round of waits at every target: those the member's last poll left that still fit,
    /// and a new [`WaitForData`] to each other target.
    pub(super) fn wait_round(&mut self, max_records: usize) -> WaitRound {
        let kept = match (&self.kept, &self.early_wake) {
            (Some(slot), None) => take(slot),
            _ => None,
        };
        let (claimed, mut kept) = match kept {
            Some(k) if k.generation == self.generation && k.max_records == max_records => {
                (k.claimed, k.waits)
            }
            _ => (Arc::new(AtomicBool::new(false)), Vec::new()),
        };
        claimed.store(false, Ordering::Release);
        // One early wake-up for the round: the first partition to fire it spends it.
        let early_wake = self.early_wake.clone().map(EarlyWake::new);
        let waits = self
            .targets
            .iter()
            .map(|&(p, from)| {
                let same = |w: &ParkedWait| w.partition == p && w.from == from;
                let found = from.and(kept.iter().position(same));
                let taken = found.map(|k| kept.swap_remove(k));
                match taken.and_then(|mut wait| wait.still_waits().then_some(wait)) {
                    Some(wait) => wait,
                    None => {
                        let (wake, woken) = oneshot::channel();
                        self.partitions[p as usize].do_send(WaitForData {
                            group: self.group.clone(),
                            from,
                            max_records,
                            claimed: claimed.clone(),
                            wake,
                            early_wake: early_wake.clone(),
                        });
                        ParkedWait {
                            partition: p,
                            from,
                            woken,
                        }
                    }
                }
            })
            .collect();
        WaitRound { claimed, waits }
    }

    /// Leaves `round`'s waits from explicit positions, but the one at `answered` (an index
    /// of its waits), to the member's next poll, if the plan's generation is still the
    /// group's.
    pub(super) fn keep(&self, mut round: WaitRound, answered: usize, max_records: usize) {
        let Some(slot) = &self.kept else { return };
        if self.rebalance_seen() || self.early_wake.is_some() {
            return;
        }
        round.waits.swap_remove(answered);
        // A wait from the committed offset is never taken over (see the module docs).
        round.waits.retain(|wait| wait.from.is_some());
        if round.waits.is_empty() {
            return;
        }
        let kept = KeptWaits {
            generation: self.generation,
            max_records,
            claimed: round.claimed,
            waits: round.waits,
        };
        *slot.lock().unwrap_or_else(|poisoned| poisoned.into_inner()) = Some(kept);
    }
}

fn take(slot: &KeptSlot) -> Option<KeptWaits> {
    slot.lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
        .take()
}

impl ParkedWait {
    /// Whether it still waits: not answered yet (by a write or a restart while its member
    /// was between polls; a poll then sends a new wait, which answers at once where there
    /// is data, as it would have without this one).
    fn still_waits(&mut self) -> bool {
        matches!(self.woken.try_recv(), Ok(None))
    }
}

impl WaitRound {
    /// The first wait to answer, and its index; never, when the round has none. A dropped
    /// answer (closed mailbox, panicked handler) counts as data, which the fetch after it
    /// meets as its error.
    pub(super) fn first_answer(&mut self) -> impl Future<Output = (Woken, usize)> + '_ {
        poll_fn(|cx| {
            for (k, wait) in self.waits.iter_mut().enumerate() {
                if let Poll::Ready(answer) = Pin::new(&mut wait.woken).poll(cx) {
                    let woken = match answer {
                        Ok(Ok(fetched)) => Woken::Data(fetched),
                        Ok(Err(e)) => Woken::Error(e),
                        Err(oneshot::Canceled) => Woken::Data(None),
                    };
                    return Poll::Ready((woken, k));
                }
            }
            Poll::Pending
        })
    }
}
