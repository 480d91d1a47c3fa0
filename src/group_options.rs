//! How a consumer group behaves, fixed by its first member's join: [`GroupOptions`], its
//! [`Assignor`] and [`StartFrom`]. Plain data, below everything that uses it: the error type
//! names them in `GroupOptionsMismatch`, and `group` acts on them (the assignors' algorithms
//! are `group::assignor`'s).

use serde::{Deserialize, Serialize};

/// How a group deals its topic's partitions to its members.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub enum Assignor {
    /// Partition `p` goes to member `p % members` (members sorted by id): Kafka's
    /// `RoundRobinAssignor` for one topic. The default.
    #[default]
    RoundRobin,
    /// Each member gets one contiguous range, the first `partitions % members` members one
    /// partition more: Kafka's `RangeAssignor`.
    Range,
    /// A partition keeps its owner unless balance demands a move (Kafka's `StickyAssignor`):
    /// a rebalance moves only the partitions of departed members and those a member holds
    /// beyond its fair share, so consumers keep their caches and in-flight work.
    Sticky,
}

/// Where a group with no committed offset starts reading a partition (Kafka's
/// `auto.offset.reset`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub enum StartFrom {
    /// The log start offset: everything retained. The default.
    #[default]
    Earliest,
    /// The log end offset when the group is created: only records produced after it. The
    /// position is stored as the group's committed offset, so a restart before the first
    /// commit does not skip the records produced in between.
    Latest,
}

/// How a group behaves, fixed by its first member's join (a later join with other options
/// is refused with `GroupOptionsMismatch`). Built with chainable setters from the defaults
/// (round-robin, from the earliest offset):
///
/// ```
/// use nanokafka::{Assignor, GroupOptions, StartFrom};
/// let options = GroupOptions::new()
///     .assignor(Assignor::Range)
///     .start(StartFrom::Latest);
/// assert_eq!(options.start, StartFrom::Latest);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct GroupOptions {
    /// How partitions are spread over the members (default round-robin).
    pub assignor: Assignor,
    /// Where the group starts reading a partition it has no committed offset for (default
    /// the earliest offset).
    pub start: StartFrom,
}

impl GroupOptions {
    /// The defaults: [`Assignor::default`], [`StartFrom::Earliest`].
    pub fn new() -> Self {
        GroupOptions::default()
    }

    /// Sets how partitions are spread over the members.
    pub fn assignor(mut self, assignor: Assignor) -> Self {
        self.assignor = assignor;
        self
    }

    /// Sets where the group starts reading a partition without a committed offset.
    pub fn start(mut self, start: StartFrom) -> Self {
        self.start = start;
        self
    }
}

impl From<Assignor> for GroupOptions {
    fn from(assignor: Assignor) -> Self {
        GroupOptions::default().assignor(assignor)
    }
}
