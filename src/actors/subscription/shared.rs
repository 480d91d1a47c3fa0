//! What the embedded `SubscriptionActor<T>` and the Kafka backend's
//! `KafkaSubscriptionActor<T>` do alike, apart from reaching the broker: the
//! [`Reporter`] that logs and sends their [`SubscriptionEvent`]s (rebalances told as
//! differences, records that do not decode, dead letters, the end), and what the
//! decode-error policy makes of a record that does not decode. The rules per partition are
//! `group::delivery`'s and the dead letters' format `group::dead_letter`'s (plain Rust); this
//! is the part that needs actix.

use actix::Recipient;
use tokio::sync::watch;

use crate::error::Error;
use crate::group::dead_letter::{DeadLetter, DeadLetterReason};
use crate::group::delivery;
use crate::group::Assignment;
use crate::messages::{
    DecodeAction, OnDecodeError, SubscribeOptions, SubscriptionEnd, SubscriptionEvent,
};

/// How writing a dead letter failed.
#[derive(Debug)]
pub(crate) enum LetterFailed {
    /// It could not be produced: the subscription ends, the record uncommitted.
    Produce(Error),
    /// It was produced, but committing past the record was refused (a rebalance).
    Commit(Error),
}

/// Reports what happens to a subscription: logs each event in the subscription's span,
/// sends it to the events recipient, and sends the end to the [`Subscription`]'s watchers
/// (`crate::messages::Subscription`).
#[derive(Debug)]
pub(crate) struct Reporter {
    span: tracing::Span,
    events: Option<Recipient<SubscriptionEvent>>,
    /// The member's partitions as last told (the events' differences are against it).
    assignment: Vec<u32>,
    /// The generation the events last told of.
    told: Option<u64>,
    end: watch::Sender<Option<SubscriptionEnd>>,
}

impl Reporter {
    pub(crate) fn new(
        span: tracing::Span,
        events: Option<Recipient<SubscriptionEvent>>,
        end: watch::Sender<Option<SubscriptionEnd>>,
    ) -> Self {
        Reporter {
            span,
            events,
            assignment: Vec::new(),
            told: None,
            end,
        }
    }

    /// The subscription's span (topic, group, member).
    pub(crate) fn span(&self) -> &tracing::Span {
        &self.span
    }

    /// Logs `event` and sends it to the events recipient. `do_send`: events keep their order
    /// and the last one is sent as the actor stops (a pending `send` would be dropped).
    pub(crate) fn emit(&self, event: SubscriptionEvent) {
        let _span = self.span.clone().entered();
        match &event {
            SubscriptionEvent::DecodeFailed { .. } => tracing::error!(?event, "subscription"),
            SubscriptionEvent::DeadLettered { .. } => tracing::warn!(?event, "subscription"),
            _ => tracing::info!(?event, "subscription"),
        }
        if let Some(events) = &self.events {
            events.do_send(event);
        }
    }

    /// The member's assignment as a poll, a join or a rejoin told it: a generation not told
    /// yet is reported as differences (`Revoked`, if any, then `Assigned`) and returned, for
    /// the actor to enter it.
    pub(crate) fn learn(&mut self, assignment: Assignment) -> Option<u64> {
        let generation = assignment.generation;
        if self.told == Some(generation) {
            return None;
        }
        self.told = Some(generation);
        let (revoked, assigned) = delivery::rebalance(&self.assignment, &assignment.partitions);
        if !revoked.is_empty() {
            self.emit(SubscriptionEvent::Revoked {
                generation,
                partitions: revoked,
            });
        }
        self.emit(SubscriptionEvent::Assigned {
            generation,
            partitions: assigned,
        });
        self.assignment = assignment.partitions;
        Some(generation)
    }

    /// The record at `at` (partition, offset; those the `Decode` error names, if it does)
    /// does not decode (`error`). Under `options`' policy it is to be dead-lettered
    /// (returned), or the subscription ends (reported, and the end returned).
    pub(crate) fn undecodable(
        &self,
        options: &SubscribeOptions,
        error: &Error,
        at: (u32, u64),
    ) -> Result<DeadLetter, SubscriptionEnd> {
        let (partition, offset, text) = match error {
            Error::Decode {
                partition,
                offset,
                source,
                ..
            } => (*partition, *offset, source.to_string()),
            other => (at.0, at.1, other.to_string()),
        };
        match options.decode_error_policy() {
            OnDecodeError::DeadLetter => Ok(DeadLetter {
                partition,
                offset,
                attempts: 1,
                reason: DeadLetterReason::Decode(text),
            }),
            OnDecodeError::Stop => {
                self.emit(SubscriptionEvent::DecodeFailed {
                    partition,
                    offset,
                    error: text.clone(),
                    action: DecodeAction::Stopped,
                });
                Err(SubscriptionEnd::DecodeError {
                    partition,
                    offset,
                    error: text,
                })
            }
        }
    }

    /// Reports how writing `letter` went: produced (and committed past, or the commit
    /// refused) is reported; a failed produce is the subscription's end, returned.
    pub(crate) fn dead_lettered(
        &self,
        letter: DeadLetter,
        written: Result<(), LetterFailed>,
    ) -> Option<SubscriptionEnd> {
        let DeadLetter {
            partition,
            offset,
            attempts,
            reason,
        } = letter;
        match written {
            Err(LetterFailed::Produce(error)) => {
                return Some(SubscriptionEnd::DeadLetterFailed {
                    partition,
                    offset,
                    error,
                })
            }
            Err(LetterFailed::Commit(error)) => self.emit(SubscriptionEvent::CommitRefused {
                partition,
                offset,
                error,
            }),
            Ok(()) => {}
        }
        self.emit(match reason {
            DeadLetterReason::Decode(error) => SubscriptionEvent::DecodeFailed {
                partition,
                offset,
                error,
                action: DecodeAction::DeadLettered,
            },
            DeadLetterReason::RetriesExhausted => SubscriptionEvent::DeadLettered {
                partition,
                offset,
                attempts,
            },
        });
        None
    }

    /// A commit of `partition` up to `offset` was refused (`error`).
    pub(crate) fn commit_refused(&self, partition: u32, offset: u64, error: Error) {
        self.emit(SubscriptionEvent::CommitRefused {
            partition,
            offset,
            error,
        });
    }

    /// The actor stopped, `ending` (`None`: without a reason, its system is stopping):
    /// reports the end and resolves the subscription's watchers.
    pub(crate) fn ended(&self, ending: Option<SubscriptionEnd>) {
        let why = ending.unwrap_or(SubscriptionEnd::BrokerStopped);
        self.emit(SubscriptionEvent::Ended(why.clone()));
        self.end.send_replace(Some(why));
    }
}
