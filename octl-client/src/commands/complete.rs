//! `orchestratectl __complete KIND [WORD…]`: what the completion scripts of
//! [`super::shell`] call for the values only the daemon knows — run ids, a run's node names,
//! agent profiles, open discussions and pending proposals. Not a command of the CLI (no
//! script offers it): [`crate::main`] answers it before parsing. It never starts the daemon
//! and always exits 0; with the daemon down it prints nothing.

use octl_proto::method::{DiscussionList, DoctorAgents, NoParams, RunList, RunShow, SpinoffList};
use octl_proto::rpc::{ListParams, RunListParams, RunParams};
use octl_proto::state::SpinoffStatus;

use crate::client::Client;

/// The argument the completion scripts call the CLI with.
pub const COMPLETE: &str = "__complete";

/// What the scripts installed before `__complete` call for run ids; still answered.
pub const COMPLETE_RUNS: &str = "__complete-runs";

/// A kind of value the daemon completes; its name is the word the scripts pass.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Runs,
    Nodes,
    Profiles,
    Discussions,
    Proposals,
}

impl Kind {
    pub const ALL: [Kind; 5] = [
        Kind::Runs,
        Kind::Nodes,
        Kind::Profiles,
        Kind::Discussions,
        Kind::Proposals,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Kind::Runs => "runs",
            Kind::Nodes => "nodes",
            Kind::Profiles => "profiles",
            Kind::Discussions => "discussions",
            Kind::Proposals => "proposals",
        }
    }

    /// The kind an argument's values are, from its value name in [`crate::cli`] and the
    /// command group it is in (an `ID` is a discussion's or a proposal's by its group).
    pub fn of_value(value_name: &str, group: Option<&str>) -> Option<Kind> {
        match (value_name, group) {
            ("RUN", _) => Some(Kind::Runs),
            ("NODE", _) => Some(Kind::Nodes),
            ("PROFILE", _) => Some(Kind::Profiles),
            ("ID", Some("discussion")) => Some(Kind::Discussions),
            ("ID", Some("spinoff")) => Some(Kind::Proposals),
            _ => None,
        }
    }
}

/// Answers `__complete KIND [WORD…]` (`args` after the program name; `__complete-runs` is
/// `__complete runs`). The words are the command line typed so far: a node is completed
/// from the run they name (after `--run`, else the first word that names a run, else
/// `$OCTL_RUN`).
pub fn answer(args: &[std::ffi::OsString]) -> i32 {
    let words: Vec<String> = args
        .iter()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    let (kind, rest) = match words.split_first() {
        Some((first, rest)) if first == COMPLETE_RUNS => (Some(Kind::Runs), rest),
        Some((_, rest)) => match rest.split_first() {
            Some((k, rest)) => (Kind::ALL.into_iter().find(|c| c.name() == k), rest),
            None => (None, rest),
        },
        None => (None, &[][..]),
    };
    let Some(kind) = kind else { return 0 };
    // `orchestratectl --home DIR … <tab>` completes from that home's daemon.
    let home_arg = value_of(rest, "--home").map(std::path::PathBuf::from);
    let Ok(home) = crate::home::Home::from_env(home_arg.as_deref()) else {
        return 0;
    };
    let client = Client::new(home, false);
    let Ok(rt) = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    else {
        return 0;
    };
    for value in rt.block_on(values(&client, kind, rest)) {
        println!("{value}");
    }
    0
}

async fn values(client: &Client, kind: Kind, words: &[String]) -> Vec<String> {
    match kind {
        Kind::Runs => runs(client).await,
        Kind::Nodes => {
            let named = value_of(words, "--run")
                .map(str::to_string)
                .or_else(|| std::env::var("OCTL_RUN").ok());
            // A word that names a run is tried in order: the first the daemon resolves.
            let candidates = named.into_iter().chain(
                words
                    .iter()
                    .filter(|w| !w.starts_with('-') && w.len() >= 6)
                    .cloned(),
            );
            for run in candidates {
                let shown = client.call_method::<RunShow>(&RunParams { run }).await;
                if let Ok(shown) = shown {
                    return shown.nodes.into_iter().map(|n| n.node.id).collect();
                }
            }
            Vec::new()
        }
        Kind::Profiles => client
            .call_method::<DoctorAgents>(&NoParams {})
            .await
            .map(|r| r.agents.into_iter().map(|a| a.profile).collect())
            .unwrap_or_default(),
        Kind::Discussions => client
            .call_method::<DiscussionList>(&ListParams {
                run: None,
                open: Some(true),
            })
            .await
            .map(|l| l.into_iter().map(|d| d.discussion.id).collect())
            .unwrap_or_default(),
        Kind::Proposals => client
            .call_method::<SpinoffList>(&ListParams::default())
            .await
            .map(|l| {
                l.into_iter()
                    .filter(|p| p.spinoff.status == SpinoffStatus::Proposed)
                    .map(|p| p.spinoff.id)
                    .collect()
            })
            .unwrap_or_default(),
    }
}

/// Every run id, newest first.
async fn runs(client: &Client) -> Vec<String> {
    let listed = client
        .call_method::<RunList>(&RunListParams::default())
        .await;
    match listed.and_then(|l| l.parse()) {
        Ok(runs) => runs.into_iter().rev().map(|r| r.id).collect(),
        Err(_) => Vec::new(),
    }
}

/// The value of `OPTION X` or `OPTION=X` among the words (bash splits the second into
/// `OPTION`, `=`, `X`).
fn value_of<'a>(words: &'a [String], option: &str) -> Option<&'a str> {
    let mut it = words.iter().map(String::as_str);
    while let Some(w) = it.next() {
        if w == option {
            return match it.next() {
                Some("=") => it.next(),
                v => v,
            };
        }
        if let Some(v) = w.strip_prefix(option).and_then(|r| r.strip_prefix('=')) {
            return Some(v);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_is_found_after_its_option_in_either_form() {
        let w = |s: &[&str]| s.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let run = |s: &[&str]| value_of(&w(s), "--run").map(str::to_string);
        assert_eq!(
            run(&["node", "send", "--run", "01ABC", "--node"]).as_deref(),
            Some("01ABC")
        );
        assert_eq!(run(&["x", "--run=01ABC"]).as_deref(), Some("01ABC"));
        assert_eq!(run(&["x", "--run", "=", "01ABC"]).as_deref(), Some("01ABC"));
        assert_eq!(run(&["run", "logs", "01ABC"]), None);
        assert_eq!(run(&["x", "--running"]), None);
    }

    #[test]
    fn ids_are_told_apart_by_their_group() {
        assert_eq!(
            Kind::of_value("ID", Some("discussion")),
            Some(Kind::Discussions)
        );
        assert_eq!(Kind::of_value("ID", Some("spinoff")), Some(Kind::Proposals));
        assert_eq!(Kind::of_value("ID", Some("run")), None);
        assert_eq!(Kind::of_value("NODE", None), Some(Kind::Nodes));
    }
}
