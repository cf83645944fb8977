//! Identifiers and their validation. Every message names the field, what was given and the
//! accepted form, so a caller (often an agent) can correct itself without reading docs.

use crate::error::AppError;

/// Shortest accepted run id prefix.
pub const MIN_PREFIX: usize = 6;
/// Length of a full ULID.
pub const ULID_LEN: usize = 26;
/// The shortest prefix of an id shown to a person. A ULID's first 10 characters are its
/// creation millisecond; 8 name only a 256 ms window, which runs started together share.
pub const SHOWN_PREFIX: usize = 10;

/// The length of the shortest prefix of `id` that none of `others` starts with, at least
/// `min` (and at most the whole id). Among sorted ids, an id's two neighbours are the only
/// others that matter.
pub fn unique_prefix_len<'a>(
    id: &str,
    others: impl IntoIterator<Item = &'a str>,
    min: usize,
) -> usize {
    let shared = others
        .into_iter()
        .filter(|o| *o != id)
        .map(|o| {
            id.bytes()
                .zip(o.bytes())
                .take_while(|(a, b)| a == b)
                .count()
        })
        .max()
        .unwrap_or(0);
    (shared + 1).max(min).min(id.len())
}

/// `id` cut to [`unique_prefix_len`] among `others`, at least [`SHOWN_PREFIX`] long.
pub fn shown_prefix<'a, 'b>(id: &'a str, others: impl IntoIterator<Item = &'b str>) -> &'a str {
    &id[..unique_prefix_len(id, others, SHOWN_PREFIX)]
}

/// A run reference as given by a user: a full ULID or a unique prefix (upper-cased).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RunRef {
    Full(String),
    Prefix(String),
}

impl RunRef {
    pub fn as_str(&self) -> &str {
        match self {
            RunRef::Full(s) | RunRef::Prefix(s) => s,
        }
    }

    /// Does the full run id `id` match this reference?
    pub fn matches(&self, id: &str) -> bool {
        match self {
            RunRef::Full(s) => s == id,
            RunRef::Prefix(p) => id.starts_with(p.as_str()),
        }
    }
}

fn is_crockford(c: char) -> bool {
    c.is_ascii_digit() || (c.is_ascii_uppercase() && !matches!(c, 'I' | 'L' | 'O' | 'U'))
}

/// Parses the `run` field: a ULID (26 Crockford base-32 characters) or a prefix of ≥ 6.
/// Anything that looks like a path is refused with its own message.
pub fn parse_run_ref(field: &str, given: &str) -> Result<RunRef, AppError> {
    let accepted = "use a run id (a 26-character ULID such as 01JDXJ5R8Q4M0ZK7P2W9TB3C6E) or a unique prefix of at least 6 of its characters";
    if given.contains('/') || given.contains('\\') || given.contains("..") || given.starts_with('.')
    {
        return Err(AppError::invalid(format!(
            "invalid {field} {given:?}: it looks like a path; {accepted}"
        )));
    }
    let upper = given.to_ascii_uppercase();
    if upper.len() < MIN_PREFIX || upper.len() > ULID_LEN || !upper.chars().all(is_crockford) {
        return Err(AppError::invalid(format!(
            "invalid {field} {given:?}: {accepted}"
        )));
    }
    if upper.len() == ULID_LEN {
        if !is_full_run_id(&upper) {
            return Err(AppError::invalid(format!(
                "invalid {field} {given:?}: not a valid ULID; {accepted}"
            )));
        }
        Ok(RunRef::Full(upper))
    } else {
        Ok(RunRef::Prefix(upper))
    }
}

/// Is `s` a full, canonical (upper-case) ULID? Used for directory names under `runs/`.
/// The ulid crate drops the bits above 128 (the first character is at most `7`), so a string
/// is canonical only if it encodes back to itself.
pub fn is_full_run_id(s: &str) -> bool {
    s.len() == ULID_LEN
        && s.chars().all(is_crockford)
        && ulid::Ulid::from_string(s).is_ok_and(|u| u.to_string() == s)
}

/// Validates a node id: `[a-z0-9][a-z0-9-]{0,62}`.
pub fn validate_node_id(field: &str, given: &str) -> Result<(), AppError> {
    if is_node_id(given) {
        Ok(())
    } else {
        Err(AppError::invalid(format!(
            "invalid {field} {given:?}: use 1-63 of a-z, 0-9 and '-', starting with a letter or digit"
        )))
    }
}

/// Node ids the daemon keeps for names of its own: an orchestrate run's integration branch is
/// `octl/<RUN>/integration`, beside its nodes' `octl/<RUN>/<NODE>`.
pub const RESERVED_NODE_IDS: &[(&str, &str)] = &[(
    "integration",
    "the daemon names an orchestrate run's integration branch octl/<RUN>/integration",
)];

/// Why `id` may not name a node of a plan or manifest, if it is reserved.
pub fn reserved_node_id(id: &str) -> Option<&'static str> {
    RESERVED_NODE_IDS
        .iter()
        .find(|(name, _)| *name == id)
        .map(|(_, why)| *why)
}

pub fn is_node_id(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b.len() <= 63
        && (b[0].is_ascii_lowercase() || b[0].is_ascii_digit())
        && b.iter()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
}

/// Validates an idempotency key: 1-128 printable ASCII characters without spaces.
pub fn validate_idempotency_key(given: &str) -> Result<(), AppError> {
    if !given.is_empty() && given.len() <= 128 && given.bytes().all(|c| c.is_ascii_graphic()) {
        Ok(())
    } else {
        Err(AppError::invalid(format!(
            "invalid idempotency_key {given:?}: use 1-128 printable ASCII characters without spaces"
        )))
    }
}

/// A fresh ULID, canonical upper-case form.
pub fn new_ulid() -> String {
    ulid::Ulid::new().to_string()
}

/// A new conversation id for Claude Code (`--session-id` takes a UUID): a ULID's 128 bits
/// (48 of time, 80 random) written as a version-7 UUID, which has the same layout.
pub fn new_session_id() -> String {
    let mut bits = ulid::Ulid::new().0;
    bits = (bits & !(0xF << 76)) | (0x7 << 76); // version 7
    bits = (bits & !(0x3 << 62)) | (0x2 << 62); // RFC 4122 variant
    let h = format!("{bits:032x}");
    format!(
        "{}-{}-{}-{}-{}",
        &h[0..8],
        &h[8..12],
        &h[12..16],
        &h[16..20],
        &h[20..32]
    )
}

/// Is `s` a UUID in its canonical text form (8-4-4-4-12 hex digits)?
pub fn is_uuid(s: &str) -> bool {
    let b = s.as_bytes();
    b.len() == 36
        && b.iter().enumerate().all(|(i, c)| match i {
            8 | 13 | 18 | 23 => *c == b'-',
            _ => c.is_ascii_hexdigit(),
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shown_prefix_is_unique_and_at_least_ten() {
        let a = "01M8SEXK4Q0000000000000000";
        let b = "01M8SEXK4Q7000000000000000";
        let c = "01M8SEXK9Z0000000000000000";
        assert_eq!(shown_prefix(a, [b, c]), "01M8SEXK4Q0");
        assert_eq!(shown_prefix(c, [a, b]), "01M8SEXK9Z");
        assert_eq!(shown_prefix(c, []), "01M8SEXK9Z");
        // Itself among the others changes nothing.
        assert_eq!(unique_prefix_len(a, [a], 10), 10);
        assert_eq!(unique_prefix_len("ab", ["abc"], 1), 2);
    }

    #[test]
    fn session_ids_are_uuids() {
        let a = new_session_id();
        assert!(is_uuid(&a), "{a}");
        assert_eq!(&a[14..15], "7");
        assert!(matches!(&a[19..20], "8" | "9" | "a" | "b"), "{a}");
        assert_ne!(a, new_session_id());
        assert!(!is_uuid("not-a-uuid"));
    }

    #[test]
    fn run_refs() {
        let id = new_ulid();
        assert_eq!(parse_run_ref("run", &id).unwrap(), RunRef::Full(id.clone()));
        assert_eq!(
            parse_run_ref("run", &id[..6].to_ascii_lowercase()).unwrap(),
            RunRef::Prefix(id[..6].to_string())
        );
        for bad in [
            "",
            "01JDX",
            "../../etc",
            "01JDXJ/x",
            "01JDXJ5R8Q4M0ZK7P2W9TB3C6EX",
            "01JDXI",
        ] {
            let err = parse_run_ref("run", bad).unwrap_err();
            assert!(err.message.contains("run"), "{}", err.message);
        }
        assert!(parse_run_ref("run", "../x")
            .unwrap_err()
            .message
            .contains("path"));
    }

    #[test]
    fn node_ids() {
        for good in ["a", "api", "0", "unit-7", &"a".repeat(63)] {
            assert!(is_node_id(good), "{good}");
        }
        for bad in ["", "-a", "A", "a_b", "../x", "a b", &"a".repeat(64)] {
            assert!(!is_node_id(bad), "{bad}");
        }
        let msg = validate_node_id("node", "../x").unwrap_err().message;
        assert_eq!(
            msg,
            "invalid node \"../x\": use 1-63 of a-z, 0-9 and '-', starting with a letter or digit"
        );
    }
}
