//! `nanokafka users`: the SCRAM users of a data directory (`<data_dir>/security/scram-credentials`):
//! `add`, `delete`, `list`. It edits the store file only (no data-directory lock), so it
//! works beside a running `nanokafka serve`, which applies the change to the next login.
//! A password is never taken from the command line, where any local user could read it in
//! the process list: it comes from `--password-file`, the `NANOKAFKA_SCRAM_PASSWORD`
//! environment variable, or stdin's first line.

use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use nanokafka::{ScramCredential, ScramMechanism, ScramStore};

/// The environment variable `users add` takes the password from, when no file is given.
pub const PASSWORD_ENV: &str = "NANOKAFKA_SCRAM_PASSWORD";

#[derive(Debug, clap::Subcommand)]
pub enum UsersCommand {
    /// Add a user's SCRAM credential, or replace it (salted and hashed: the password is not
    /// stored).
    Add(AddArgs),
    /// Delete a user's credential for one mechanism, or all of them.
    Delete(DeleteArgs),
    /// List the users and their mechanisms (no secrets).
    List(ListArgs),
}

#[derive(Debug, clap::Args)]
pub struct AddArgs {
    #[arg(long, value_name = "DIR")]
    data_dir: PathBuf,
    /// The user name.
    name: String,
    /// SCRAM-SHA-256 or SCRAM-SHA-512.
    #[arg(long, value_name = "MECHANISM", value_parser = mechanism)]
    mechanism: ScramMechanism,
    /// PBKDF2 iterations, 4096 to 16384 [default: 4096].
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(i64::from(nanokafka::MIN_SCRAM_ITERATIONS)..=i64::from(nanokafka::MAX_SCRAM_ITERATIONS)))]
    iterations: Option<u32>,
    /// A file holding the password (one trailing newline is ignored); without it, the
    /// NANOKAFKA_SCRAM_PASSWORD environment variable, else stdin's first line.
    #[arg(long, value_name = "FILE")]
    password_file: Option<PathBuf>,
}

#[derive(Debug, clap::Args)]
pub struct DeleteArgs {
    #[arg(long, value_name = "DIR")]
    data_dir: PathBuf,
    /// The user name.
    name: String,
    /// Delete only this mechanism's credential [default: all of the user's].
    #[arg(long, value_name = "MECHANISM", value_parser = mechanism)]
    mechanism: Option<ScramMechanism>,
}

#[derive(Debug, clap::Args)]
pub struct ListArgs {
    #[arg(long, value_name = "DIR")]
    data_dir: PathBuf,
    /// One JSON document: [{"user": ..., "mechanisms": [...]}].
    #[arg(long)]
    json: bool,
}

fn mechanism(name: &str) -> Result<ScramMechanism, String> {
    ScramMechanism::from_name(name)
        .ok_or_else(|| format!("'{name}' is not SCRAM-SHA-256 or SCRAM-SHA-512"))
}

pub fn run(command: UsersCommand) -> ExitCode {
    let done = match command {
        UsersCommand::Add(args) => add(args),
        UsersCommand::Delete(args) => delete(args),
        UsersCommand::List(args) => list(args),
    };
    match done {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("error: {message}");
            ExitCode::from(1)
        }
    }
}

fn add(args: AddArgs) -> Result<(), String> {
    let password = password(args.password_file.as_deref())?;
    let iterations = args
        .iterations
        .unwrap_or(nanokafka::DEFAULT_SCRAM_ITERATIONS);
    let salt = nanokafka::ScramStore::random_salt()?;
    let credential =
        ScramCredential::from_password(args.mechanism, password.as_bytes(), &salt, iterations);
    let path = store_path(&args.data_dir)?;
    let mut store = ScramStore::load_or_new(&path)?;
    store.upsert(&args.name, args.mechanism, credential)?;
    store.save(&path)?;
    eprintln!("{} credential stored for {:?}", args.mechanism, args.name);
    Ok(())
}

fn delete(args: DeleteArgs) -> Result<(), String> {
    let path = store_path(&args.data_dir)?;
    let mut store = ScramStore::load(&path)?.unwrap_or(ScramStore::new()?);
    if !store.delete(&args.name, args.mechanism) {
        let what = args
            .mechanism
            .map(|m| format!(" for {m}"))
            .unwrap_or_default();
        return Err(format!("no SCRAM credential of {:?}{what}", args.name));
    }
    store.save(&path)
}

fn list(args: ListArgs) -> Result<(), String> {
    let path = store_path(&args.data_dir)?;
    let store = ScramStore::load(&path)?.unwrap_or(ScramStore::new()?);
    let users: Vec<(&str, Vec<ScramMechanism>)> = store.users().collect();
    if args.json {
        let users: Vec<_> = users
            .iter()
            .map(|(user, mechanisms)| {
                let names: Vec<_> = mechanisms.iter().map(|m| m.name()).collect();
                serde_json::json!({ "user": user, "mechanisms": names })
            })
            .collect();
        println!("{}", serde_json::Value::Array(users));
        return Ok(());
    }
    println!("{:<32} MECHANISMS", "USER");
    for (user, mechanisms) in users {
        let names: Vec<_> = mechanisms.iter().map(|m| m.name()).collect();
        println!("{user:<32} {}", names.join(","));
    }
    Ok(())
}

/// The store's path, once the data directory is known to exist (a typo should not create
/// a directory of credentials nobody serves).
fn store_path(data_dir: &Path) -> Result<PathBuf, String> {
    if !data_dir.is_dir() {
        return Err(format!("{} is not a directory", data_dir.display()));
    }
    Ok(ScramStore::path(data_dir))
}

/// The password from the file, else the environment, else stdin's first line.
fn password(file: Option<&Path>) -> Result<String, String> {
    let text = match file {
        Some(file) => std::fs::read_to_string(file)
            .map_err(|e| format!("cannot read the password file {}: {e}", file.display()))?,
        None => match std::env::var(PASSWORD_ENV) {
            Ok(password) => password,
            Err(_) => {
                let mut line = String::new();
                std::io::stdin()
                    .lock()
                    .read_line(&mut line)
                    .map_err(|e| format!("cannot read the password from stdin: {e}"))?;
                line
            }
        },
    };
    let line = text.strip_suffix('\n').unwrap_or(&text);
    let password = line.strip_suffix('\r').unwrap_or(line);
    if password.is_empty() {
        return Err(format!(
            "no password: give --password-file FILE, the {PASSWORD_ENV} environment variable, \
             or a line on stdin"
        ));
    }
    Ok(password.to_owned())
}
