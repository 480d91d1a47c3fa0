//! The registry's modes, as Confluent defines them: a global mode and a mode per subject
//! (which wins), kept in `_schemas` as `MODE` records.
//!
//! | mode | registering | deleting | explicit ids |
//! | --- | --- | --- | --- |
//! | `READWRITE` (the default) | yes, checked by the compatibility level | yes | refused |
//! | `READONLY`, `READONLY_OVERRIDE` | refused (42205) | refused (42205) | — |
//! | `IMPORT` | only with an explicit id (and, optionally, version), not checked for compatibility | yes | required |
//!
//! `IMPORT` is how a registry is filled from another one keeping its ids: set it on an
//! empty registry (or subject), register each version with its id, set `READWRITE` back.

use std::fmt;
use std::str::FromStr;

/// A mode; see the module documentation.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum Mode {
    #[default]
    ReadWrite,
    ReadOnly,
    ReadOnlyOverride,
    Import,
}

impl Mode {
    pub fn name(self) -> &'static str {
        match self {
            Mode::ReadWrite => "READWRITE",
            Mode::ReadOnly => "READONLY",
            Mode::ReadOnlyOverride => "READONLY_OVERRIDE",
            Mode::Import => "IMPORT",
        }
    }

    /// Whether changes (registering, deleting) are refused.
    pub fn read_only(self) -> bool {
        matches!(self, Mode::ReadOnly | Mode::ReadOnlyOverride)
    }
}

impl fmt::Display for Mode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Mode {
    type Err = String;

    /// A mode by its name, in any case.
    fn from_str(name: &str) -> Result<Self, String> {
        let all = [
            Mode::ReadWrite,
            Mode::ReadOnly,
            Mode::ReadOnlyOverride,
            Mode::Import,
        ];
        all.into_iter()
            .find(|mode| mode.name().eq_ignore_ascii_case(name))
            .ok_or_else(|| {
                format!("Invalid mode: {name} (READWRITE, READONLY, READONLY_OVERRIDE or IMPORT)")
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modes_parse_by_name_in_any_case() {
        assert_eq!("import".parse(), Ok(Mode::Import));
        assert_eq!("READONLY_OVERRIDE".parse(), Ok(Mode::ReadOnlyOverride));
        assert!("WRITEONLY".parse::<Mode>().is_err());
        assert!(Mode::ReadOnly.read_only() && !Mode::Import.read_only());
    }
}
