//! Whether there is room on this machine for one more agent, from what is known now: the
//! machine's available memory and load, what each live agent holds and is expected to need,
//! and `[limits]`. Pure: [`crate::engine::admission`] gathers the facts and acts on the
//! answer.
//!
//! A live agent that holds less than its profile's estimate is counted at the estimate: it has
//! just started, and the memory it will take is not yet missing from `MemAvailable`. So a
//! burst of starts cannot all be admitted on the same free memory.

use std::fmt;

use crate::config::limits::{show_size, Limits};

/// A live agent on this machine, as admission sees it.
#[derive(Debug, Clone, PartialEq)]
pub struct Live {
    /// What it holds now (0 before it was first measured).
    pub resident: u64,
    /// What an agent of its profile is expected to need.
    pub estimate: u64,
}

impl Live {
    /// What it may still take beyond what it holds.
    fn reserve(&self) -> u64 {
        self.estimate.saturating_sub(self.resident)
    }

    /// What it counts for against a budget.
    fn counted(&self) -> u64 {
        self.resident.max(self.estimate)
    }
}

/// The machine now.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Machine {
    pub total: u64,
    pub available: u64,
    pub cores: usize,
    pub load_1min: Option<f64>,
}

/// Why a new agent does not start now: what it waits for, shown by `run show`.
#[derive(Debug, Clone, PartialEq)]
pub enum Shortfall {
    /// Too little memory would stay available.
    Memory {
        profile: String,
        needed: u64,
        /// Available less what live agents are still expected to take.
        free: u64,
        floor: u64,
    },
    /// The agents' memory budget would be exceeded.
    Budget {
        profile: String,
        needed: u64,
        used: u64,
        budget: u64,
    },
    /// The machine is busier than `limits.max_load`.
    Load { per_core: f64, max: f64 },
    /// `limits.max_agents` agents live already.
    Agents { live: usize, max: u32 },
}

impl fmt::Display for Shortfall {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Shortfall::Memory {
                profile,
                needed,
                free,
                floor,
            } => write!(
                f,
                "memory: a {profile} agent is expected to need {}, {} is free beyond what live agents may still take, and {} stays available (limits.min_available)",
                show_size(*needed),
                show_size(*free),
                show_size(*floor)
            ),
            Shortfall::Budget {
                profile,
                needed,
                used,
                budget,
            } => write!(
                f,
                "memory: a {profile} agent is expected to need {}, agents count for {} of limits.memory_budget {}",
                show_size(*needed),
                show_size(*used),
                show_size(*budget)
            ),
            Shortfall::Load { per_core, max } => write!(
                f,
                "a lighter load: {per_core:.2} per core, above limits.max_load {max}"
            ),
            Shortfall::Agents { live, max } => {
                write!(f, "an agent to end: {live} live, limits.max_agents is {max}")
            }
        }
    }
}

/// Whether an agent of `profile`, expected to need `needed`, may start now beside `live`.
pub fn room(
    limits: &Limits,
    machine: &Machine,
    live: &[Live],
    profile: &str,
    needed: u64,
) -> Result<(), Shortfall> {
    if let Some(max) = limits.max_agents {
        if live.len() >= max as usize {
            return Err(Shortfall::Agents {
                live: live.len(),
                max,
            });
        }
    }
    if let (Some(max), Some(load)) = (limits.max_load, machine.load_1min) {
        let per_core = load / machine.cores.max(1) as f64;
        if per_core > max {
            return Err(Shortfall::Load { per_core, max });
        }
    }
    if let Some(budget) = limits.memory_budget {
        let used: u64 = live.iter().map(Live::counted).sum();
        if used.saturating_add(needed) > budget {
            return Err(Shortfall::Budget {
                profile: profile.to_string(),
                needed,
                used,
                budget,
            });
        }
    }
    let floor = limits.min_available.of(machine.total);
    let reserved: u64 = live.iter().map(Live::reserve).sum();
    let free = machine.available.saturating_sub(reserved);
    if free < needed.saturating_add(floor) {
        return Err(Shortfall::Memory {
            profile: profile.to_string(),
            needed,
            free: free.saturating_sub(floor),
            floor,
        });
    }
    Ok(())
}

/// What an agent of a profile is expected to need: its observed peak plus `headroom` once one
/// of its agents was watched to its end; before that the larger of `prior` (the profile's
/// `memory_estimate`) and what its live agents hold, plus headroom.
pub fn estimate(prior: u64, ended_peak: Option<u64>, live_peak: u64, headroom: f64) -> u64 {
    let grown = |b: u64| (b as f64 * (1.0 + headroom)) as u64;
    match ended_peak {
        Some(peak) => grown(peak.max(live_peak)).max(1),
        None => prior.max(grown(live_peak)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::limits::{Memory, GIB};

    const MIB: u64 = 1024 * 1024;

    fn machine(available: u64) -> Machine {
        Machine {
            total: 24 * GIB,
            available,
            cores: 2,
            load_1min: Some(1.0),
        }
    }

    fn limits() -> Limits {
        Limits {
            min_available: Memory::Bytes(2 * GIB),
            ..Limits::default()
        }
    }

    #[test]
    fn young_agents_count_at_their_estimate_so_a_burst_cannot_overcommit() {
        let l = limits();
        let m = machine(10 * GIB);
        // Nothing live: 10 GiB available, 2 kept: 8 agents of 1 GiB would fit, one at a time.
        let mut live = Vec::new();
        while room(&l, &m, &live, "shell", GIB).is_ok() {
            live.push(Live {
                resident: 0,
                estimate: GIB,
            });
        }
        assert_eq!(live.len(), 8);
        let Err(Shortfall::Memory { free, floor, .. }) = room(&l, &m, &live, "shell", GIB) else {
            panic!("no memory shortfall");
        };
        assert_eq!((free, floor), (0, 2 * GIB));
        // Agents that took their memory already are in `available`; only the rest is held.
        let grown = vec![
            Live {
                resident: GIB,
                estimate: GIB,
            };
            8
        ];
        assert!(room(&l, &machine(3 * GIB + 1), &grown, "shell", GIB).is_ok());
        assert!(room(&l, &machine(3 * GIB - 1), &grown, "shell", GIB).is_err());
    }

    #[test]
    fn a_budget_counts_what_agents_hold_or_will() {
        let l = Limits {
            memory_budget: Some(700 * MIB),
            ..limits()
        };
        let m = machine(20 * GIB);
        let at = |resident| Live {
            resident,
            estimate: 300 * MIB,
        };
        assert!(room(&l, &m, &[at(0)], "shell", 300 * MIB).is_ok());
        let e = room(&l, &m, &[at(0), at(200 * MIB)], "shell", 300 * MIB).unwrap_err();
        assert_eq!(
            e.to_string(),
            "memory: a shell agent is expected to need 300 MiB, agents count for 600 MiB of limits.memory_budget 700 MiB"
        );
        // One over its estimate counts at what it holds.
        assert!(room(&l, &m, &[at(500 * MIB)], "shell", 300 * MIB).is_err());
    }

    #[test]
    fn load_and_count() {
        let l = Limits {
            max_load: Some(1.0),
            max_agents: Some(2),
            ..limits()
        };
        let busy = Machine {
            load_1min: Some(4.2),
            ..machine(20 * GIB)
        };
        let e = room(&l, &busy, &[], "claude", GIB).unwrap_err();
        assert_eq!(
            e,
            Shortfall::Load {
                per_core: 2.1,
                max: 1.0
            }
        );
        let two = vec![
            Live {
                resident: 0,
                estimate: 1
            };
            2
        ];
        assert_eq!(
            room(&l, &machine(20 * GIB), &two, "claude", 1)
                .unwrap_err()
                .to_string(),
            "an agent to end: 2 live, limits.max_agents is 2"
        );
    }

    #[test]
    fn estimates_follow_what_was_observed() {
        // Nothing observed: the prior.
        assert_eq!(estimate(GIB, None, 0, 0.25), GIB);
        // A live agent above it raises it (with headroom), before any ended.
        assert_eq!(estimate(GIB, None, 2 * GIB, 0.25), 2 * GIB + GIB / 2);
        // Once one ended, what was observed, small or large, plus headroom.
        assert_eq!(estimate(GIB, Some(100 * MIB), 0, 0.25), 125 * MIB);
        assert_eq!(estimate(GIB, Some(100 * MIB), 200 * MIB, 0.0), 200 * MIB);
    }
}
