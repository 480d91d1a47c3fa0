//! How a group behaves, fixed by its first member's join: plain data, below everything that
//! uses it (the error type names them in `GroupOptionsMismatch`).

use serde::{Deserialize, Serialize};

use super::assignor::Assignor;

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

/// How a group behaves, fixed by its first member's join.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct GroupOptions {
    pub assignor: Assignor,
    pub start: StartFrom,
}

impl GroupOptions {
    pub fn assignor(mut self, assignor: Assignor) -> Self {
        self.assignor = assignor;
        self
    }

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
