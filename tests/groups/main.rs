//! Consumer groups: membership, rebalances and assignors, the `Consumer` handle, and push
//! subscriptions. One test binary; each former test file is a module of it.

mod common;

mod consumer_groups;
mod consumer_handle;
mod dead_letters;
mod delete_group;
mod ownership_events;
mod subscription_events;
mod subscription_kit;
mod subscriptions;
