//! Helpers of the consumer group tests.

#[path = "../common/setup.rs"]
mod setup;
#[path = "../common/watchdog.rs"]
mod watchdog;

pub use setup::{broker_with_topic, produce_to};
pub use watchdog::within;
