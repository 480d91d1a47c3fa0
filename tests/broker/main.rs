//! The broker through its public API, blocking and actor faces: the original three tests
//! (`test_basic`, `test_commit`, `test_retention`), partitioning, poll and commit, backpressure,
//! retention, ordering, batches and reopening. One test binary; each former test file is a
//! module of it.

mod common;

mod actor_face;
mod broker_reopen;
mod broker_semantics;
mod broker_semantics_flow;
mod cleanup_policy;
mod compaction;
mod delete_records;
mod kafka_batches;
mod ordering;
mod produce_batch;
mod tables;
mod test_basic;
mod test_commit;
mod test_retention;
mod topic_alter;
mod topic_delete;
mod topic_delete_kill9;
