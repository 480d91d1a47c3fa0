//! Helpers of the fault tests.

#[path = "../common/stats.rs"]
mod stats;
#[path = "../common/watchdog.rs"]
mod watchdog;

pub use stats::log_end;
pub use watchdog::within;
