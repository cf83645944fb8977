//! Permission rules for Claude Code agents (docs/AGENTS.md, "Permission policy"): three lists in
//! Claude Code's own rule syntax — `Tool` or `Tool(specifier)`, e.g. `Bash(cargo test:*)`,
//! `Edit(src/**)` — that the daemon hands to the agent's settings unchanged. Claude Code
//! decides with them (deny first, then ask, then allow); a call under `ask` becomes a
//! permission request a person answers. The same type is in config.toml (`[permissions]`,
//! `[agents.NAME.permissions]`), the spawn/fan-out/orchestrate params, plans and `node.added`,
//! so a run's rules are in its log.

use serde::{Deserialize, Serialize};

use crate::AppError;

/// The longest rule accepted.
pub const MAX_RULE: usize = 1024;
/// The most rules in one list.
pub const MAX_RULES: usize = 256;

/// The accepted form, for every message that refuses a rule.
pub const RULE_FORM: &str = "a tool name, optionally with a specifier in parentheses, as Claude Code's permission rules are written: Bash, Bash(cargo test:*), Edit(src/**), WebFetch(domain:example.com), mcp__server__tool";

/// `allow`, `ask` and `deny`: what Claude Code may do without asking, must ask for, and may not.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PermissionRules {
    /// Tool calls allowed without asking.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub allow: Vec<String>,
    /// Tool calls that are asked (a `node.permission_asked` a person answers), even when an
    /// allow rule matches.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ask: Vec<String>,
    /// Tool calls refused without asking, whatever else matches.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub deny: Vec<String>,
}

impl PermissionRules {
    pub fn is_empty(&self) -> bool {
        self.allow.is_empty() && self.ask.is_empty() && self.deny.is_empty()
    }

    /// These rules, then `more`'s, each rule once (the first place it is given).
    pub fn and(&self, more: &PermissionRules) -> PermissionRules {
        let join = |a: &[String], b: &[String]| {
            let mut out: Vec<String> = Vec::with_capacity(a.len() + b.len());
            for r in a.iter().chain(b) {
                if !out.contains(r) {
                    out.push(r.clone());
                }
            }
            out
        };
        PermissionRules {
            allow: join(&self.allow, &more.allow),
            ask: join(&self.ask, &more.ask),
            deny: join(&self.deny, &more.deny),
        }
    }

    /// Every rule checked; `at` names where they were given (`permissions`, `--`, a plan
    /// node), and the message names the list and the rule.
    pub fn check(&self, at: &str) -> Result<(), AppError> {
        for (list, rules) in [
            ("allow", &self.allow),
            ("ask", &self.ask),
            ("deny", &self.deny),
        ] {
            if rules.len() > MAX_RULES {
                return Err(AppError::invalid(format!(
                    "invalid {at}{list}: {} rules; at most {MAX_RULES}",
                    rules.len()
                )));
            }
            for rule in rules {
                check_rule(rule).map_err(|why| {
                    AppError::invalid(format!("invalid {at}{list} {rule:?}: {why}"))
                })?;
            }
        }
        Ok(())
    }
}

/// Why `rule` is not in Claude Code's rule syntax, if it is not.
pub fn check_rule(rule: &str) -> Result<(), String> {
    if rule.len() > MAX_RULE {
        return Err(format!("{} bytes; at most {MAX_RULE}", rule.len()));
    }
    if rule.chars().any(char::is_control) {
        return Err(format!("control characters; give {RULE_FORM}"));
    }
    let (tool, specifier) = match rule.split_once('(') {
        Some((tool, rest)) => match rest.strip_suffix(')') {
            Some(s) if !s.trim().is_empty() => (tool, Some(s)),
            Some(_) => return Err(format!("an empty specifier; give {RULE_FORM}")),
            None => return Err(format!("no closing ')'; give {RULE_FORM}")),
        },
        None => (rule, None),
    };
    let named = tool.starts_with(|c: char| c.is_ascii_alphabetic())
        && tool
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    if !named {
        return Err(match specifier {
            None if rule.trim().is_empty() => format!("empty; give {RULE_FORM}"),
            _ => format!("{tool:?} is not a tool name; give {RULE_FORM}"),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn claude_codes_rule_syntax_is_accepted_and_the_rest_named() {
        for ok in [
            "Bash",
            "Bash(cargo test:*)",
            "Bash(python3 *)",
            "Edit(src/**)",
            "Read(./.env)",
            "WebFetch(domain:example.com)",
            "mcp__github__create_issue",
            "Bash(echo \"(a)\")",
        ] {
            assert_eq!(check_rule(ok), Ok(()), "{ok}");
        }
        for (bad, says) in [
            ("", "empty"),
            ("Bash(", "closing"),
            ("Bash()", "empty specifier"),
            ("bash cargo", "not a tool name"),
            ("(x)", "not a tool name"),
            ("Bash(a\nb)", "control"),
        ] {
            let why = check_rule(bad).unwrap_err();
            assert!(why.contains(says), "{bad:?}: {why}");
        }
        let rules = PermissionRules {
            deny: vec!["Bash(rm".into()],
            ..PermissionRules::default()
        };
        let e = rules.check("--").unwrap_err();
        assert!(
            e.message.contains("invalid --deny \"Bash(rm\""),
            "{}",
            e.message
        );
    }

    #[test]
    fn lists_join_in_order_each_rule_once() {
        let a = PermissionRules {
            allow: vec!["Bash(git *)".into()],
            ask: vec!["Edit".into()],
            ..PermissionRules::default()
        };
        let b = PermissionRules {
            allow: vec!["Bash(git *)".into(), "Read".into()],
            deny: vec!["WebFetch".into()],
            ..PermissionRules::default()
        };
        let j = a.and(&b);
        assert_eq!(j.allow, ["Bash(git *)", "Read"]);
        assert_eq!(j.ask, ["Edit"]);
        assert_eq!(j.deny, ["WebFetch"]);
        assert!(PermissionRules::default().is_empty() && !j.is_empty());
    }
}
