//! Faults and bad input: actor panics under load, supervision and restart storms, bad
//! arguments and a hostile environment. One test binary; each former test file is a module
//! of it.

mod common;

mod actor_faults;
mod bad_input;
mod bad_input_env;
mod supervision;
