//! Who may reach the Kafka listener, and what they may do: plain Rust, no actix, no sockets.
//!
//! The listener asks this layer; the embedded API (the process's own handles) never does:
//! code in the broker's process is trusted, as a Kafka broker trusts its own threads.
//! Each part owns one file under `<data_dir>/security/`, written atomically (temporary file,
//! fsync, rename, fsync of the directory), and documents that file's format on its type.

pub mod acl;
pub mod quota;
pub mod scram;
pub mod scram_exchange;
