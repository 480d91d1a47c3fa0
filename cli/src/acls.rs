//! `nanokafka acls add|remove|list`: the ACL bindings of a data directory
//! (`DATA_DIR/security/acls`), in kafka-acls' vocabulary. Works while `serve` runs: the
//! store's lock orders the command's change with the broker's CreateAcls and DeleteAcls,
//! and the broker reads the change at its next request.

use std::path::PathBuf;
use std::process::ExitCode;

use nanokafka::security::acl::{
    AclBinding, AclFilter, AclStore, Operation, PatternFilter, PatternType, Permission,
    ResourceType, CLUSTER_NAME, WILDCARD,
};

use crate::offline::{self, Failure};

#[derive(Debug, clap::Subcommand)]
pub enum AclsCommand {
    /// Add ACLs: every principal given, for every operation, on the resource, from each host.
    Add(AclArgs),
    /// Remove the ACLs that match: of the resource, and of the principals, operations and
    /// hosts given (all of them when none is given).
    Remove(AclArgs),
    /// List the ACLs, of the resource and principals given (all when none is).
    List(AclArgs),
}

#[derive(Debug, clap::Args)]
pub struct AclArgs {
    /// The data directory (it may be served meanwhile).
    #[arg(long, value_name = "DIR")]
    data_dir: PathBuf,

    /// A principal (User:NAME, or User:* for every user) the ACL allows; repeatable.
    #[arg(long, value_name = "User:NAME")]
    allow_principal: Vec<String>,

    /// A principal the ACL denies; repeatable. A DENY wins over every ALLOW.
    #[arg(long, value_name = "User:NAME")]
    deny_principal: Vec<String>,

    /// With `list`: only the ACLs of this principal, allowed or denied.
    #[arg(long, value_name = "User:NAME")]
    principal: Option<String>,

    /// The host (an IP address) the ACL is about [default: *, every host]; repeatable.
    #[arg(long, visible_aliases = ["allow-host", "deny-host"], value_name = "HOST")]
    host: Vec<String>,

    /// An operation: All, Read, Write, Create, Delete, Alter, Describe, ClusterAction,
    /// DescribeConfigs, AlterConfigs, IdempotentWrite; repeatable.
    #[arg(long, value_name = "OPERATION")]
    operation: Vec<String>,

    /// The topic (* for every topic).
    #[arg(long, value_name = "TOPIC")]
    topic: Option<String>,

    /// The consumer group (* for every group).
    #[arg(long, value_name = "GROUP")]
    group: Option<String>,

    /// The transactional id (* for every one).
    #[arg(long, value_name = "ID")]
    transactional_id: Option<String>,

    /// The cluster.
    #[arg(long)]
    cluster: bool,

    /// How the resource name matches: literal (the default for add and remove), prefixed;
    /// for remove and list also any and match (every ACL that applies to the name).
    #[arg(long, value_name = "TYPE")]
    resource_pattern_type: Option<String>,
}

pub fn run(command: AclsCommand) -> ExitCode {
    offline::finish(match command {
        AclsCommand::Add(args) => add(&args),
        AclsCommand::Remove(args) => remove(&args),
        AclsCommand::List(args) => list(&args),
    })
}

fn usage(text: impl Into<String>) -> Failure {
    Failure(text.into())
}

impl AclArgs {
    fn store(&self) -> Result<AclStore, Failure> {
        if !self.data_dir.is_dir() {
            return Err(usage(format!(
                "{} is not a directory",
                self.data_dir.display()
            )));
        }
        AclStore::open(&self.data_dir).map_err(|e| Failure(e.to_string()))
    }

    /// The resource named, if any: its type and name.
    fn resource(&self) -> Result<Option<(ResourceType, String)>, Failure> {
        let mut named = Vec::new();
        if let Some(t) = &self.topic {
            named.push((ResourceType::Topic, t.clone()));
        }
        if let Some(g) = &self.group {
            named.push((ResourceType::Group, g.clone()));
        }
        if let Some(t) = &self.transactional_id {
            named.push((ResourceType::TransactionalId, t.clone()));
        }
        if self.cluster {
            named.push((ResourceType::Cluster, CLUSTER_NAME.to_owned()));
        }
        match named.len() {
            0 | 1 => Ok(named.pop()),
            _ => Err(usage(
                "name one resource: --topic, --group, --transactional-id or --cluster",
            )),
        }
    }

    fn pattern(&self, default: PatternFilter) -> Result<PatternFilter, Failure> {
        let Some(text) = &self.resource_pattern_type else {
            return Ok(default);
        };
        match text.to_ascii_lowercase().as_str() {
            "any" => Ok(PatternFilter::Any),
            "match" => Ok(PatternFilter::Match),
            other => PatternType::parse(other)
                .map(PatternFilter::Exactly)
                .ok_or_else(|| {
                    usage(format!(
                        "--resource-pattern-type takes literal, prefixed, any or match, not '{text}'"
                    ))
                }),
        }
    }

    fn operations(&self) -> Result<Vec<Operation>, Failure> {
        self.operation
            .iter()
            .map(|o| {
                Operation::parse(o)
                    .ok_or_else(|| usage(format!("'{o}' is not an operation kafka-acls knows")))
            })
            .collect()
    }

    /// (principal, permission) for each principal given.
    fn principals(&self) -> Vec<(String, Permission)> {
        let allow = self
            .allow_principal
            .iter()
            .map(|p| (p.clone(), Permission::Allow));
        let deny = self
            .deny_principal
            .iter()
            .map(|p| (p.clone(), Permission::Deny));
        allow.chain(deny).collect()
    }
}

fn add(args: &AclArgs) -> Result<(), Failure> {
    let (resource_type, name) = args.resource()?.ok_or_else(|| {
        usage("add needs a resource: --topic, --group, --transactional-id or --cluster")
    })?;
    let pattern_type = match args.pattern(PatternFilter::Exactly(PatternType::Literal))? {
        PatternFilter::Exactly(p) => p,
        _ => {
            return Err(usage(
                "add takes --resource-pattern-type literal or prefixed",
            ))
        }
    };
    let operations = args.operations()?;
    if operations.is_empty() {
        return Err(usage("add needs --operation"));
    }
    let principals = args.principals();
    if principals.is_empty() {
        return Err(usage("add needs --allow-principal or --deny-principal"));
    }
    let hosts = match args.host.is_empty() {
        true => vec![WILDCARD.to_owned()],
        false => args.host.clone(),
    };
    let mut bindings = Vec::new();
    for (principal, permission) in &principals {
        for host in &hosts {
            for &operation in &operations {
                let binding = AclBinding {
                    resource_type,
                    pattern_type,
                    name: name.clone(),
                    principal: principal.clone(),
                    host: host.clone(),
                    operation,
                    permission: *permission,
                };
                binding
                    .validate()
                    .map_err(|why| usage(format!("{binding}: {why}")))?;
                bindings.push(binding);
            }
        }
    }
    let store = args.store()?;
    store
        .update(|acls| {
            let mut changed = false;
            for binding in &bindings {
                changed |= acls.add(binding.clone());
            }
            (changed, ())
        })
        .map_err(|e| Failure(e.to_string()))?;
    println!("Added ACLs:");
    for binding in &bindings {
        println!(" \t{binding}");
    }
    Ok(())
}

/// The filter of `remove` and `list`: what the arguments name, ANY for the rest.
fn filter(args: &AclArgs, default: PatternFilter) -> Result<Vec<AclFilter>, Failure> {
    let resource = args.resource()?;
    let base = AclFilter {
        resource_type: resource.as_ref().map(|(t, _)| *t),
        name: resource.map(|(_, n)| n),
        pattern: Some(args.pattern(default)?),
        host: None,
        ..AclFilter::default()
    };
    let principals: Vec<(Option<String>, Option<Permission>)> = match args.principals() {
        ps if ps.is_empty() => vec![(args.principal.clone(), None)],
        ps => ps
            .into_iter()
            .map(|(p, perm)| (Some(p), Some(perm)))
            .collect(),
    };
    let operations: Vec<Option<Operation>> = match args.operations()? {
        os if os.is_empty() => vec![None],
        os => os.into_iter().map(Some).collect(),
    };
    let hosts: Vec<Option<String>> = match args.host.is_empty() {
        true => vec![None],
        false => args.host.iter().cloned().map(Some).collect(),
    };
    let mut filters = Vec::new();
    for (principal, permission) in &principals {
        for operation in &operations {
            for host in &hosts {
                filters.push(AclFilter {
                    principal: principal.clone(),
                    permission: *permission,
                    operation: *operation,
                    host: host.clone(),
                    ..base.clone()
                });
            }
        }
    }
    Ok(filters)
}

fn remove(args: &AclArgs) -> Result<(), Failure> {
    if args.resource()?.is_none() {
        return Err(usage(
            "remove needs a resource: --topic, --group, --transactional-id or --cluster",
        ));
    }
    let filters = filter(args, PatternFilter::Exactly(PatternType::Literal))?;
    let store = args.store()?;
    let removed = store
        .update(|acls| {
            let removed: Vec<AclBinding> = filters
                .iter()
                .flat_map(|f| acls.remove_matching(f))
                .collect();
            (!removed.is_empty(), removed)
        })
        .map_err(|e| Failure(e.to_string()))?;
    println!("Removed {} ACLs:", removed.len());
    for binding in &removed {
        println!(" \t{binding}");
    }
    Ok(())
}

fn list(args: &AclArgs) -> Result<(), Failure> {
    let filters = filter(args, PatternFilter::Any)?;
    let acls = args.store()?.current();
    let mut last = None;
    for binding in acls.iter().filter(|b| filters.iter().any(|f| f.matches(b))) {
        let resource = (binding.resource_type, binding.pattern_type, &binding.name);
        if last != Some(resource) {
            println!(
                "Current ACLs for resource `ResourcePattern(resourceType={}, name={}, \
                 patternType={})`:",
                binding.resource_type, binding.name, binding.pattern_type
            );
            last = Some(resource);
        }
        println!(
            " \t(principal={}, host={}, operation={}, permissionType={})",
            binding.principal, binding.host, binding.operation, binding.permission
        );
    }
    Ok(())
}
