//! [`BlockingSchemas`]: [`crate::Schemas`] for plain threads (`schema-registry` feature).

use std::time::Duration;

use crate::async_handle::Schemas;
use crate::error::Result;
use crate::handle::NanoKafka;
use crate::schemas::{Registered, SchemaInput, SubjectVersion};

/// The broker's schema registry with blocking calls: [`NanoKafka::schemas`]. Each call is
/// [`Schemas`]'s, run to completion on this thread.
#[derive(Debug, Clone)]
pub struct BlockingSchemas {
    broker: NanoKafka,
    schemas: Schemas,
}

impl NanoKafka {
    /// The broker's schema registry, as the REST API serves it (no HTTP listener needed).
    pub fn schemas(&self) -> BlockingSchemas {
        BlockingSchemas {
            broker: self.clone(),
            schemas: self.async_handle().schemas(),
        }
    }
}

impl BlockingSchemas {
    /// [`Schemas::register`].
    ///
    /// # Errors
    /// As [`Schemas::register`]; `BlockingInActorContext` on an actix/tokio thread.
    pub fn register(&self, subject: &str, schema: &SchemaInput) -> Result<Registered> {
        let schemas = &self.schemas;
        (self.broker).call_async(|_| schemas.register(subject, schema), Duration::ZERO)
    }

    /// [`Schemas::latest`].
    ///
    /// # Errors
    /// As [`Schemas::latest`]; `BlockingInActorContext` on an actix/tokio thread.
    pub fn latest(&self, subject: &str) -> Result<SubjectVersion> {
        let schemas = &self.schemas;
        (self.broker).call_async(|_| schemas.latest(subject), Duration::ZERO)
    }

    /// [`Schemas::schema_by_id`].
    ///
    /// # Errors
    /// As [`Schemas::schema_by_id`]; `BlockingInActorContext` on an actix/tokio thread.
    pub fn schema_by_id(&self, id: u32) -> Result<SchemaInput> {
        let schemas = &self.schemas;
        (self.broker).call_async(|_| schemas.schema_by_id(id), Duration::ZERO)
    }
}
