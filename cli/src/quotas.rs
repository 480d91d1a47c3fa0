//! `nanokafka quotas list|set|remove`: the Kafka listener's client quotas
//! (`<data_dir>/security/quotas`), changed without the data directory's lock, as Kafka's
//! `kafka-configs.sh --entity-type users|clients` changes a running cluster's: a `serve` of
//! the same directory rereads the file within a second.

use std::path::PathBuf;
use std::process::ExitCode;

use nanokafka::internals::security::quota::{ClientQuotas, EntityName, QuotaEntity, QuotaKey};

use crate::offline::{self, Failure};

#[derive(Debug, clap::Subcommand)]
pub enum QuotasCommand {
    /// Print every client quota: entity, key, value.
    List(DirArg),
    /// Set quotas on an entity: `nanokafka quotas set --data-dir D --client-id app
    /// producer_byte_rate=1048576`.
    Set(SetArgs),
    /// Remove quotas from an entity: `nanokafka quotas remove --data-dir D --client-id app
    /// producer_byte_rate`.
    Remove(RemoveArgs),
}

#[derive(Debug, clap::Args)]
pub struct DirArg {
    /// The data directory (it may be served by a running `nanokafka serve`).
    #[arg(long, value_name = "DIR")]
    data_dir: PathBuf,
}

/// The entity: a user, a client id, or both; each named or the default.
#[derive(Debug, clap::Args)]
pub struct EntityArgs {
    /// The user (the SASL user; `ANONYMOUS` without SASL).
    #[arg(long, value_name = "NAME", conflicts_with = "default_user")]
    user: Option<String>,
    /// The default user: every user without a quota of its own.
    #[arg(long)]
    default_user: bool,
    /// The client id (`client.id`).
    #[arg(long, value_name = "ID", conflicts_with = "default_client_id")]
    client_id: Option<String>,
    /// The default client id: every client id without a quota of its own.
    #[arg(long)]
    default_client_id: bool,
}

#[derive(Debug, clap::Args)]
pub struct SetArgs {
    #[command(flatten)]
    dir: DirArg,
    #[command(flatten)]
    entity: EntityArgs,
    /// `KEY=VALUE`: producer_byte_rate, consumer_byte_rate (bytes/s), request_percentage.
    #[arg(required = true, value_name = "KEY=VALUE")]
    values: Vec<String>,
}

#[derive(Debug, clap::Args)]
pub struct RemoveArgs {
    #[command(flatten)]
    dir: DirArg,
    #[command(flatten)]
    entity: EntityArgs,
    /// The keys to remove.
    #[arg(required = true, value_name = "KEY")]
    keys: Vec<String>,
}

pub fn run(command: QuotasCommand) -> ExitCode {
    offline::finish(match command {
        QuotasCommand::List(dir) => list(&dir),
        QuotasCommand::Set(args) => set(&args),
        QuotasCommand::Remove(args) => remove(&args),
    })
}

fn open(dir: &DirArg) -> Result<ClientQuotas, Failure> {
    offline::check_data_dir(&dir.data_dir)?;
    Ok(ClientQuotas::open_data_dir(&dir.data_dir)?)
}

fn entity(args: &EntityArgs) -> Result<QuotaEntity, Failure> {
    let side = |name: &Option<String>, default: bool| match (name, default) {
        (Some(n), _) => Some(EntityName::Named(n.clone())),
        (None, true) => Some(EntityName::Default),
        (None, false) => None,
    };
    let user = side(&args.user, args.default_user);
    let client_id = side(&args.client_id, args.default_client_id);
    let parts = [("user", &user), ("client-id", &client_id)];
    let parts = parts
        .iter()
        .filter_map(|(t, n)| n.as_ref().map(|n| (*t, n.to_wire())));
    QuotaEntity::from_parts(parts).map_err(|e| {
        Failure(format!(
            "{e} (give --user/--default-user and/or --client-id/--default-client-id)"
        ))
    })
}

fn key(name: &str) -> Result<QuotaKey, Failure> {
    QuotaKey::parse(name).ok_or_else(|| {
        Failure(format!(
            "unknown quota key {name} (producer_byte_rate, consumer_byte_rate, request_percentage)"
        ))
    })
}

fn list(dir: &DirArg) -> Result<(), Failure> {
    let config = open(dir)?.config();
    for (entity, values) in config.entries() {
        for (key, value) in values {
            println!("{entity}\t{key}\t{value}");
        }
    }
    Ok(())
}

fn set(args: &SetArgs) -> Result<(), Failure> {
    let entity = entity(&args.entity)?;
    let mut changes = Vec::with_capacity(args.values.len());
    for pair in &args.values {
        let (name, value) = pair
            .split_once('=')
            .ok_or_else(|| Failure(format!("{pair}: expected KEY=VALUE")))?;
        let key = key(name)?;
        let value: f64 = value.parse().map_err(|e| Failure(format!("{pair}: {e}")))?;
        key.validate(value).map_err(Failure)?;
        changes.push((key, Some(value)));
    }
    apply(&args.dir, &entity, changes)
}

fn remove(args: &RemoveArgs) -> Result<(), Failure> {
    let entity = entity(&args.entity)?;
    let changes = (args.keys.iter())
        .map(|k| Ok((key(k)?, None)))
        .collect::<Result<Vec<_>, Failure>>()?;
    apply(&args.dir, &entity, changes)
}

fn apply(
    dir: &DirArg,
    entity: &QuotaEntity,
    changes: Vec<(QuotaKey, Option<f64>)>,
) -> Result<(), Failure> {
    let quotas = open(dir)?;
    quotas.alter(|config| {
        for (key, value) in changes {
            config.set(entity, key, value);
        }
    })?;
    Ok(())
}
