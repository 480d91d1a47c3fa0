//! Reading a data directory with kafka-python, a Kafka client library, as an independent check
//! that the segment files are Kafka log segments. `tests/tools/kafka_segments.py` does the
//! reading and documents the JSON it prints; `.ci/run` provides the interpreter.

use std::env;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// Names the Python interpreter that has kafka-python (`.ci/run` sets it to its venv).
const PYTHON_ENV: &str = "NANOKAFKA_PYTHON";

/// The venv `.ci/run` creates when `NANOKAFKA_VENV` is not set, relative to `$HOME`.
const DEFAULT_VENV_PYTHON: &str = ".cache/nanokafka/venv/bin/python";

/// kafka-python's decoding of every partition directory under `dir`, or `None` when no
/// interpreter with kafka-python is available (the caller then skips its check; a line on
/// stderr says so).
///
/// # Panics
/// When the script fails (a segment it cannot parse; its stderr says where), when its output
/// is not JSON, and when no interpreter is available while `CI` is set: CI never skips this
/// check. An interpreter named by `NANOKAFKA_PYTHON` that lacks kafka-python also panics, since
/// whoever set the variable asked for the check.
pub fn decode_data_dir(dir: &Path) -> Option<serde_json::Value> {
    let python = interpreter()?;
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/tools/kafka_segments.py");
    let output = Command::new(python)
        .arg(&script)
        .arg(dir)
        .output()
        .unwrap_or_else(|e| panic!("running {} {}: {e}", python.display(), script.display()));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "kafka-python could not read {} ({}):\n{stderr}",
        dir.display(),
        output.status,
    );
    let json = serde_json::from_slice(&output.stdout);
    Some(json.unwrap_or_else(|e| panic!("kafka_segments.py printed no JSON: {e}")))
}

/// The interpreter to run the script with, looked for once per test binary.
fn interpreter() -> Option<&'static Path> {
    static FOUND: OnceLock<Option<PathBuf>> = OnceLock::new();
    FOUND.get_or_init(find_interpreter).as_deref()
}

fn find_interpreter() -> Option<PathBuf> {
    let under_ci = env::var_os("CI").is_some_and(|v| !v.is_empty());
    let skip = |why: String| {
        assert!(
            !under_ci,
            "CI must check segments with kafka-python, but {why}"
        );
        eprintln!("skipping the kafka-python segment check: {why}");
        None
    };
    let (python, named) = match env::var_os(PYTHON_ENV).filter(|v| !v.is_empty()) {
        Some(python) => (PathBuf::from(python), true),
        None => match env::var_os("HOME") {
            Some(home) => (Path::new(&home).join(DEFAULT_VENV_PYTHON), false),
            None => return skip(format!("{PYTHON_ENV} and HOME are not set")),
        },
    };
    if !named && !python.exists() {
        return skip(format!(
            "{PYTHON_ENV} is not set and {} does not exist (`bash .ci/run` creates it)",
            python.display()
        ));
    }
    let probe = Command::new(&python).args(["-c", "import kafka"]).output();
    let why = match probe {
        Ok(probe) if probe.status.success() => return Some(python),
        Ok(probe) => format!(
            "{} cannot import kafka: {}",
            python.display(),
            String::from_utf8_lossy(&probe.stderr).trim()
        ),
        Err(e) => format!("{} cannot be run: {e}", python.display()),
    };
    assert!(!named, "{PYTHON_ENV} is set, but {why}");
    skip(why)
}
