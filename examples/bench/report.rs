//! Figures, the targets they are held to, and the two outputs: a readable table and one JSON
//! line (always the last line of stdout). A throughput figure also carries the process's CPU
//! time per record over its interval (the "CPU µs/rec" column, `cpu_us_per_record` in JSON).

use serde_json::{json, Map, Value};

use crate::harness::Rate;

/// A same-run measurement a figure is compared with.
#[derive(Debug, Clone)]
pub struct Baseline {
    pub label: String,
    pub value: f64,
}

/// The target a figure is held to (the list: `benches/README.md`).
#[derive(Debug, Clone, Copy)]
pub enum Target {
    /// `value / baseline >= x`.
    RatioAtLeast(f64),
    /// `value / baseline > x`.
    RatioAbove(f64),
    /// `value / baseline <= x` (for latencies: at most x times the baseline's).
    RatioAtMost(f64),
    /// `value >= x` in the figure's unit.
    AtLeast(f64),
    /// `value <= x` in the figure's unit.
    AtMost(f64),
}

/// One row of the table.
#[derive(Debug, Clone)]
pub struct Figure {
    /// The JSON key (snake_case).
    pub key: &'static str,
    pub label: String,
    pub value: f64,
    pub unit: &'static str,
    pub baseline: Option<Baseline>,
    pub target: Option<Target>,
    /// The process's CPU time per record over the measured interval, in microseconds.
    pub cpu_us_per_record: Option<f64>,
}

impl Figure {
    pub fn new(
        key: &'static str,
        label: impl Into<String>,
        value: f64,
        unit: &'static str,
    ) -> Self {
        Figure {
            key,
            label: label.into(),
            value,
            unit,
            baseline: None,
            target: None,
            cpu_us_per_record: None,
        }
    }

    /// A throughput figure in records per second, with its CPU per record.
    pub fn rate(key: &'static str, label: impl Into<String>, rate: Rate) -> Self {
        Figure::new(key, label, rate.per_sec, "rec/s").cpu(rate.cpu_us_per_record)
    }

    pub fn cpu(mut self, us_per_record: f64) -> Self {
        self.cpu_us_per_record = Some(us_per_record);
        self
    }

    pub fn vs(mut self, label: impl Into<String>, value: f64) -> Self {
        self.baseline = Some(Baseline {
            label: label.into(),
            value,
        });
        self
    }

    pub fn target(mut self, target: Target) -> Self {
        self.target = Some(target);
        self
    }

    pub fn ratio(&self) -> Option<f64> {
        self.baseline
            .as_ref()
            .filter(|b| b.value > 0.0)
            .map(|b| self.value / b.value)
    }

    pub fn met(&self) -> Option<bool> {
        match self.target? {
            Target::RatioAtLeast(x) => self.ratio().map(|r| r >= x),
            Target::RatioAbove(x) => self.ratio().map(|r| r > x),
            Target::RatioAtMost(x) => self.ratio().map(|r| r <= x),
            Target::AtLeast(x) => Some(self.value >= x),
            Target::AtMost(x) => Some(self.value <= x),
        }
    }

    fn target_text(&self) -> String {
        match self.target {
            None => "-".into(),
            Some(Target::RatioAtLeast(x)) => format!(">= {x}x baseline"),
            Some(Target::RatioAbove(x)) => format!("> {x}x baseline"),
            Some(Target::RatioAtMost(x)) => format!("<= {x}x baseline"),
            Some(Target::AtLeast(x)) => format!(">= {} {}", human(x), self.unit),
            Some(Target::AtMost(x)) => format!("<= {} {}", human(x), self.unit),
        }
    }
}

/// `12.3 M`, `456 k`, `0.512`: three significant digits, SI suffixes for large values.
pub fn human(x: f64) -> String {
    let (scaled, suffix) = match x.abs() {
        v if v >= 1e9 => (x / 1e9, " G"),
        v if v >= 1e6 => (x / 1e6, " M"),
        v if v >= 1e4 => (x / 1e3, " k"),
        _ => (x, ""),
    };
    let digits = match scaled.abs() {
        v if v >= 100.0 => 0,
        v if v >= 10.0 => 1,
        v if v >= 1.0 => 2,
        _ => 3,
    };
    format!("{scaled:.digits$}{suffix}")
}

/// A section heading and its rows, or a line saying why a comparison was skipped.
#[derive(Debug, Clone)]
pub enum Row {
    Section(&'static str),
    Figure(Figure),
    Skipped { key: &'static str, why: String },
}

/// Prints the Markdown table, then a one-line summary of the targets.
pub fn print_table(rows: &[Row]) {
    println!("| measurement | result | CPU µs/rec | baseline (same run) | ratio | target | met |");
    println!("| --- | --- | --- | --- | --- | --- | --- |");
    for row in rows {
        match row {
            Row::Section(title) => println!("| **{title}** | | | | | | |"),
            Row::Skipped { key, why } => println!("| {key} | skipped: {why} | | | | | |"),
            Row::Figure(f) => {
                let baseline = f.baseline.as_ref().map_or("-".to_string(), |b| {
                    format!("{}: {} {}", b.label, human(b.value), f.unit)
                });
                let ratio = f.ratio().map_or("-".to_string(), |r| format!("{r:.3}"));
                let cpu = f.cpu_us_per_record.map_or("-".to_string(), human);
                let met = match f.met() {
                    None => "",
                    Some(true) => "yes",
                    Some(false) => "**NO**",
                };
                println!(
                    "| {} | {} {} | {cpu} | {baseline} | {ratio} | {} | {met} |",
                    f.label,
                    human(f.value),
                    f.unit,
                    f.target_text()
                );
            }
        }
    }
    let judged: Vec<&Figure> = figures(rows).filter(|f| f.met().is_some()).collect();
    let missed: Vec<&str> = judged
        .iter()
        .filter(|f| f.met() == Some(false))
        .map(|f| f.key)
        .collect();
    println!();
    println!(
        "targets met: {}/{}; missed: {}",
        judged.len() - missed.len(),
        judged.len(),
        if missed.is_empty() {
            "none".to_string()
        } else {
            missed.join(", ")
        }
    );
}

fn figures(rows: &[Row]) -> impl Iterator<Item = &Figure> {
    rows.iter().filter_map(|r| match r {
        Row::Figure(f) => Some(f),
        _ => None,
    })
}

/// Every figure as one JSON object keyed by [`Figure::key`], plus the run's settings.
pub fn json_line(rows: &[Row], settings: Value) -> String {
    let mut out = Map::new();
    out.insert("settings".into(), settings);
    for row in rows {
        match row {
            Row::Section(_) => {}
            Row::Skipped { key, why } => {
                out.insert((*key).into(), json!({ "skipped": why }));
            }
            Row::Figure(f) => {
                let mut entry = json!({
                    "label": f.label,
                    "value": f.value,
                    "unit": f.unit,
                });
                if let Some(cpu) = f.cpu_us_per_record {
                    entry["cpu_us_per_record"] = json!(cpu);
                }
                if let Some(b) = &f.baseline {
                    entry["baseline"] = json!({ "label": b.label, "value": b.value });
                    entry["ratio"] = json!(f.ratio());
                }
                if f.target.is_some() {
                    entry["target"] = json!(f.target_text());
                    entry["met"] = json!(f.met());
                }
                out.insert(f.key.into(), entry);
            }
        }
    }
    Value::Object(out).to_string()
}
