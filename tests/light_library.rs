//! The library stays light: a service that depends on `nanokafka` builds none of the
//! command line's dependencies (its argument parser, log formatter, HTTP servers, the web
//! console's among them, and Prometheus exporter), whose only user is the `nanokafka-cli`
//! crate in `cli/` (the console's web stack comes only with the `console` feature). Read from
//! `cargo tree` over the library's normal dependencies, as a dependent would build them, and
//! checked against the binary's tree, where they must show (so the check can fail).

use std::collections::BTreeSet;
use std::process::Command;

/// Crates only the command line may bring: clap, hyper (under the Prometheus exporter's
/// HTTP listener), the subscriber that formats log lines, the exporter itself, and the web
/// console's actix-web (the `console` feature, which the binary enables).
const CLI_ONLY: &[&str] = &[
    "clap",
    "hyper",
    "tracing-subscriber",
    "metrics-exporter-prometheus",
    "actix-web",
    "actix-http",
];

/// The crate names in `cargo tree -p PACKAGE -e normal ARGS`, from this workspace's lock
/// file (offline: nothing is fetched).
fn normal_dependencies(package: &str, args: &[&str]) -> BTreeSet<String> {
    let output = Command::new(env!("CARGO"))
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .args(["tree", "--offline", "-p", package, "-e", "normal"])
        .args(["--prefix", "none", "--format", "{p}"])
        .args(args)
        .output()
        .expect("run cargo tree");
    assert!(
        output.status.success(),
        "cargo tree -p {package} {args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout)
        .expect("UTF-8 from cargo tree")
        .lines()
        .filter_map(|line| line.split_whitespace().next())
        .map(str::to_owned)
        .collect()
}

fn cli_only_in(tree: &BTreeSet<String>) -> Vec<&'static str> {
    CLI_ONLY
        .iter()
        .copied()
        .filter(|name| tree.contains(*name))
        .collect()
}

#[test]
fn the_library_with_default_features_builds_none_of_the_command_lines_dependencies() {
    let tree = normal_dependencies("nanokafka", &[]);
    assert!(tree.contains("actix"), "read no tree: {tree:?}");
    let found = cli_only_in(&tree);
    assert!(found.is_empty(), "the library brings {found:?}: {tree:?}");
}

#[test]
fn the_library_with_the_kafka_backend_builds_none_of_the_command_lines_dependencies() {
    let tree = normal_dependencies("nanokafka", &["--features", "kafka"]);
    assert!(
        tree.contains("rdkafka"),
        "the feature took no effect: {tree:?}"
    );
    let found = cli_only_in(&tree);
    assert!(found.is_empty(), "the library brings {found:?}: {tree:?}");
}

#[test]
fn the_binary_brings_every_one_of_them() {
    let tree = normal_dependencies("nanokafka-cli", &[]);
    assert_eq!(cli_only_in(&tree), CLI_ONLY, "{tree:?}");
}
