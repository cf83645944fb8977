//! `[limits]` of config.toml, and the memory knobs of `[agents.NAME]`: what admission of new
//! agents on this machine keeps free, how much it expects an agent to need, and the memory
//! limit of each agent's cgroup (docs/CONFIGURATION.md, "Admission by resources").
//!
//! ```toml
//! [limits]
//! min_available = "15%"       # never start an agent that would leave less available
//! headroom = "25%"            # added to a profile's observed memory
//! memory_budget = "16GiB"     # optional: what all agents together may use
//! max_load = 2.0              # optional: no start while the load average per core is above
//! max_agents = 64             # optional: live agents on this machine, every run
//! cgroups = true              # each agent in a cgroup of its own where one is writable
//!
//! [agents.claude]
//! memory_estimate = "1GiB"    # what a new agent is assumed to need before one was observed
//! memory_max = "6GiB"         # its cgroup's limit (default: total memory − min_available)
//! ```
//!
//! Sizes are bytes (an integer) or a number with a binary unit (`512MiB`, `1.5GiB`; `K`, `M`,
//! `G`, `T` and `KB`… mean the same powers of 1024); a share is `N%`.

use serde::Deserialize;

use octl_proto::AppError;

const KIB: u64 = 1024;
const MIB: u64 = 1024 * KIB;
pub const GIB: u64 = 1024 * MIB;

/// What an agent of a profile is assumed to need until one of its agents has been watched to
/// its end: what `max_parallel = "auto"` assumed of every agent before admission (1 GiB).
pub const DEFAULT_ESTIMATE: u64 = GIB;

/// A size or a share as written in config.toml: an integer (bytes) or a string.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(untagged)]
pub enum Amount {
    Bytes(u64),
    Text(String),
}

/// An amount of memory: absolute, or a share of the machine's total.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Memory {
    Bytes(u64),
    /// A fraction of the machine's total memory, from 0 to 1.
    Share(f64),
}

impl Memory {
    /// In bytes, on a machine of `total` bytes.
    pub fn of(self, total: u64) -> u64 {
        match self {
            Memory::Bytes(b) => b,
            Memory::Share(f) => (total as f64 * f) as u64,
        }
    }
}

/// The raw `[limits]` table, checked into [`Limits`] by [`Limits::from_raw`].
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawLimits {
    pub min_available: Option<Amount>,
    pub headroom: Option<Amount>,
    pub memory_budget: Option<Amount>,
    pub max_load: Option<f64>,
    pub max_agents: Option<u32>,
    pub cgroups: Option<bool>,
}

/// `[limits]`: admission of new agents on this machine, for every run (the local runner).
#[derive(Debug, Clone, PartialEq)]
pub struct Limits {
    /// Memory that stays available (`MemAvailable`) after a new agent gets what it is expected
    /// to need.
    pub min_available: Memory,
    /// Added to a profile's observed peak: what a new agent of it is expected to need.
    pub headroom: f64,
    /// What all of this daemon's agents together may be expected to use.
    pub memory_budget: Option<u64>,
    /// No agent starts while the 1-minute load average per core is above this.
    pub max_load: Option<f64>,
    /// No agent starts while this many live on this machine.
    pub max_agents: Option<u32>,
    /// Each agent in a cgroup of its own where a cgroup tree is writable.
    pub cgroups: bool,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            // Out of the machine's last tenth, where out-of-memory killers start acting, with
            // room for its other programs to grow: an agent once started is not taken back.
            min_available: Memory::Share(0.15),
            headroom: 0.25,
            memory_budget: None,
            max_load: None,
            max_agents: None,
            cgroups: true,
        }
    }
}

impl Limits {
    pub fn from_raw(raw: &RawLimits) -> Result<Limits, AppError> {
        let d = Limits::default();
        let min_available = match &raw.min_available {
            Some(a) => memory("limits.min_available", a)?,
            None => d.min_available,
        };
        let headroom = match &raw.headroom {
            Some(a) => share("limits.headroom", a, 10.0)?,
            None => d.headroom,
        };
        let memory_budget = raw
            .memory_budget
            .as_ref()
            .map(|a| size("limits.memory_budget", a))
            .transpose()?;
        if let Some(l) = raw.max_load.filter(|l| !(l.is_finite() && *l > 0.0)) {
            return Err(AppError::invalid(format!(
                "limits.max_load {l}: give the 1-minute load average per core above which no agent starts, a number above 0 such as 2.0"
            )));
        }
        if raw.max_agents == Some(0) {
            return Err(AppError::invalid(
                "limits.max_agents 0: give how many agents may live on this machine at once, at least 1",
            ));
        }
        Ok(Limits {
            min_available,
            headroom,
            memory_budget,
            max_load: raw.max_load,
            max_agents: raw.max_agents,
            cgroups: raw.cgroups.unwrap_or(d.cgroups),
        })
    }
}

const SIZE_FORM: &str =
    "give bytes, or a number with a unit such as \"512MiB\" or \"2GiB\" (K, M, G, T: powers of 1024)";

/// A size in bytes, as [`parse_size`] reads it; errors name `field`.
pub fn size(field: &str, a: &Amount) -> Result<u64, AppError> {
    match a {
        Amount::Bytes(b) if *b > 0 => Ok(*b),
        Amount::Text(t) => parse_size(t).ok_or_else(|| bad(field, t, SIZE_FORM)),
        Amount::Bytes(b) => Err(bad(field, &b.to_string(), SIZE_FORM)),
    }
}

/// A size, or a share of the machine's memory (`"10%"`).
fn memory(field: &str, a: &Amount) -> Result<Memory, AppError> {
    if let Amount::Text(t) = a {
        if t.trim().ends_with('%') {
            return share(field, a, 1.0).map(Memory::Share);
        }
    }
    size(field, a).map(Memory::Bytes).map_err(|_| {
        let given = match a {
            Amount::Bytes(b) => b.to_string(),
            Amount::Text(t) => t.clone(),
        };
        bad(
            field,
            &given,
            &format!("{SIZE_FORM}, or a share of the machine's memory such as \"10%\""),
        )
    })
}

/// `"25%"` as 0.25, at most `max`.
fn share(field: &str, a: &Amount, max: f64) -> Result<f64, AppError> {
    let form = format!("give a share such as \"25%\" (at most {}%)", max * 100.0);
    let Amount::Text(t) = a else {
        return Err(bad(field, &format!("{a:?}"), &form));
    };
    t.trim()
        .strip_suffix('%')
        .and_then(|n| n.trim().parse::<f64>().ok())
        .map(|p| p / 100.0)
        .filter(|f| f.is_finite() && (0.0..=max).contains(f))
        .ok_or_else(|| bad(field, t, &form))
}

fn bad(field: &str, given: &str, form: &str) -> AppError {
    AppError::invalid(format!("{field} {given:?}: {form}"))
}

/// `"512MiB"`, `"1.5 GiB"`, `"2G"`, `"1048576"` → bytes; `None` for anything else or 0.
pub fn parse_size(text: &str) -> Option<u64> {
    let t = text.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (number, unit) = t.split_at(split);
    let n: f64 = number.parse().ok()?;
    let unit = unit.trim().to_ascii_lowercase();
    let scale = match unit.trim_end_matches("ib").trim_end_matches('b') {
        "" if unit.is_empty() || unit == "b" => 1,
        "k" => KIB,
        "m" => MIB,
        "g" => GIB,
        "t" => GIB * 1024,
        _ => return None,
    };
    let bytes = n * scale as f64;
    (bytes.is_finite() && bytes >= 1.0 && bytes < u64::MAX as f64).then_some(bytes as u64)
}

/// Bytes as a person reads them: `512 MiB`, `1.5 GiB`.
pub fn show_size(bytes: u64) -> String {
    if bytes >= GIB {
        let g = bytes as f64 / GIB as f64;
        if (g - g.round()).abs() < 0.05 {
            format!("{} GiB", g.round())
        } else {
            format!("{g:.1} GiB")
        }
    } else {
        format!("{} MiB", bytes.div_ceil(MIB))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_and_shares() {
        assert_eq!(parse_size("512MiB"), Some(512 * MIB));
        assert_eq!(parse_size("1.5 GiB"), Some(GIB + GIB / 2));
        assert_eq!(parse_size("2G"), Some(2 * GIB));
        assert_eq!(parse_size("2gb"), Some(2 * GIB));
        assert_eq!(parse_size("100"), Some(100));
        assert_eq!(parse_size("100b"), Some(100));
        for bad in ["", "0", "GiB", "1 XiB", "-1G", "1e3G", "a lot"] {
            assert_eq!(parse_size(bad), None, "{bad}");
        }
        assert_eq!(show_size(GIB), "1 GiB");
        assert_eq!(show_size(GIB + GIB / 2), "1.5 GiB");
        assert_eq!(show_size(300 * MIB), "300 MiB");
    }

    fn limits(toml_text: &str) -> Result<Limits, AppError> {
        let raw: RawLimits =
            toml::from_str(toml_text).map_err(|e| AppError::invalid(e.to_string()))?;
        Limits::from_raw(&raw)
    }

    #[test]
    fn the_table_reads_into_types_and_errors_name_the_field() {
        assert_eq!(limits("").unwrap(), Limits::default());
        let l = limits(
            "min_available = \"2GiB\"\nheadroom = \"50%\"\nmemory_budget = 1048576\nmax_load = 1.5\nmax_agents = 8\ncgroups = false\n",
        )
        .unwrap();
        assert_eq!(l.min_available, Memory::Bytes(2 * GIB));
        assert_eq!(l.headroom, 0.5);
        assert_eq!(l.memory_budget, Some(MIB));
        assert_eq!(
            (l.max_load, l.max_agents, l.cgroups),
            (Some(1.5), Some(8), false)
        );
        assert_eq!(
            limits("min_available = \"5%\"").unwrap().min_available,
            Memory::Share(0.05)
        );
        assert_eq!(Memory::Share(0.5).of(8 * GIB), 4 * GIB);
        for (text, field) in [
            ("min_available = \"lots\"", "limits.min_available \"lots\""),
            ("min_available = \"150%\"", "limits.min_available \"150%\""),
            ("headroom = \"-5%\"", "limits.headroom"),
            ("headroom = 3", "limits.headroom"),
            ("memory_budget = \"10%\"", "limits.memory_budget"),
            ("memory_budget = 0", "limits.memory_budget"),
            ("max_load = 0.0", "limits.max_load"),
            ("max_agents = 0", "limits.max_agents"),
        ] {
            let e = limits(text).unwrap_err();
            assert!(e.message.contains(field), "{text}: {}", e.message);
        }
    }
}
