//! The storage layer: the partition log and its recovery, a model-based property test with
//! restarts, fuzzing of everything read from disk, power loss and I/O faults on a simulated
//! disk. One test binary; each former test file is a module of it.

mod common;

mod batch_damage;
mod cleaner_model;
mod fuzz_storage;
mod interval_sync;
mod io_faults;
mod power_loss;
mod storage_log;
mod storage_model;
mod storage_recovery;
