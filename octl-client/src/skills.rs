//! The bundled Claude Code skills: embedded at build time from `skills/<name>/SKILL.md` (see
//! `build.rs`), their frontmatter, and installing them into a skills directory without ever
//! overwriting a file someone edited.
//!
//! Next to each installed `SKILL.md` a marker file, [`MARKER`], holds the 64-bit FNV-1a hash
//! (16 hex digits) of the bytes we wrote. That tells the four [`Status`]es apart: a file equal
//! to the bundled text is `installed`; a different file whose hash is the marker's is an older
//! version we wrote (`outdated`, safe to update); any other file is `modified` (kept unless
//! `--force`). Only `<dir>/<name>/SKILL.md` and the marker are ever written.

use std::ffi::OsString;
use std::io::Write;
use std::path::{Path, PathBuf};

use octl_proto::AppError;
use serde::Serialize;

/// One bundled skill: its folder name and the exact text of its SKILL.md.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Skill {
    pub name: &'static str,
    pub text: &'static str,
}

include!(concat!(env!("OUT_DIR"), "/skills.rs"));

/// The marker file next to each installed SKILL.md.
pub const MARKER: &str = ".orchestratectl-installed";
/// The skill file's name.
pub const SKILL_FILE: &str = "SKILL.md";

/// The bundled skill called `name`.
pub fn find(name: &str) -> Option<&'static Skill> {
    SKILLS.iter().find(|s| s.name == name)
}

/// Every bundled skill's name, comma-separated (for error messages).
pub fn names() -> String {
    SKILLS.iter().map(|s| s.name).collect::<Vec<_>>().join(", ")
}

/// The frontmatter keys a skill may carry that orchestratectl reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Frontmatter {
    pub name: String,
    pub description: String,
    pub argument_hint: Option<String>,
    /// `allowed-tools`: what Claude Code may run without asking while the skill is active
    /// (`Bash(orchestratectl *)`), one line separated by commas or a YAML list.
    pub allowed_tools: Vec<String>,
}

/// Splits a one-line `allowed-tools` value at the commas outside parentheses.
fn split_tools(value: &str) -> Vec<String> {
    let (mut out, mut depth, mut start) = (Vec::new(), 0i32, 0);
    for (i, c) in value.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                out.push(value[start..i].trim().to_string());
                start = i + 1;
            }
            _ => {}
        }
    }
    out.push(value[start..].trim().to_string());
    out.retain(|t| !t.is_empty());
    out
}

/// Splits a SKILL.md into its frontmatter and body. The frontmatter is the block between a
/// first line `---` and the next line `---`, of `key: value` lines whose values are one-line
/// strings (optionally quoted). `name` and `description` are required; other keys are
/// ignored (with their indented continuation lines).
pub fn parse_frontmatter(text: &str) -> Result<(Frontmatter, &str), String> {
    let rest = text
        .strip_prefix("---\n")
        .or_else(|| text.strip_prefix("---\r\n"))
        .ok_or("no frontmatter: the file must start with a line `---`")?;
    let mut name = None;
    let mut description = None;
    let mut argument_hint = None;
    let mut allowed_tools: Option<Vec<String>> = None;
    let mut in_tools_list = false;
    let mut offset = 0;
    let mut body = None;
    let mut in_unknown_key = false;
    for raw in rest.split_inclusive('\n') {
        offset += raw.len();
        let line = raw.trim_end_matches(['\n', '\r']);
        if line.trim_end() == "---" {
            body = Some(&rest[offset..]);
            break;
        }
        if line.trim().is_empty() || line.trim_start().starts_with('#') {
            continue;
        }
        if line.starts_with([' ', '\t']) {
            if in_tools_list {
                if let Some(item) = line.trim().strip_prefix("- ") {
                    allowed_tools
                        .get_or_insert_with(Vec::new)
                        .push(unquote(item.trim())?);
                    continue;
                }
            }
            if in_unknown_key {
                continue;
            }
            return Err(format!(
                "frontmatter line {line:?}: values must be one-line strings"
            ));
        }
        let (key, value) = line
            .split_once(':')
            .ok_or_else(|| format!("frontmatter line {line:?}: expected `key: value`"))?;
        let key = key.trim();
        let value = unquote(value.trim())?;
        in_tools_list = false;
        if key == "allowed-tools" {
            if allowed_tools.is_some() {
                return Err(format!("frontmatter key {key:?} appears twice"));
            }
            in_tools_list = value.is_empty();
            in_unknown_key = false;
            allowed_tools = Some(split_tools(&value));
            continue;
        }
        let slot = match key {
            "name" => &mut name,
            "description" => &mut description,
            "argument-hint" => &mut argument_hint,
            _ => {
                in_unknown_key = true;
                continue;
            }
        };
        in_unknown_key = false;
        if slot.is_some() {
            return Err(format!("frontmatter key {key:?} appears twice"));
        }
        *slot = Some(value);
    }
    let body = body.ok_or("the frontmatter is not closed by a line `---`")?;
    Ok((
        Frontmatter {
            name: name.ok_or("the frontmatter has no `name`")?,
            description: description.ok_or("the frontmatter has no `description`")?,
            argument_hint,
            allowed_tools: allowed_tools.unwrap_or_default(),
        },
        body,
    ))
}

/// A YAML scalar on one line: plain, 'single-quoted' ('' is a quote) or "double-quoted"
/// (\" and \\ escapes).
fn unquote(v: &str) -> Result<String, String> {
    let quoted = |q: char| v.len() >= 2 && v.starts_with(q) && v.ends_with(q);
    if quoted('\'') {
        Ok(v[1..v.len() - 1].replace("''", "'"))
    } else if quoted('"') {
        let mut out = String::new();
        let mut chars = v[1..v.len() - 1].chars();
        while let Some(c) = chars.next() {
            if c == '\\' {
                match chars.next() {
                    Some('n') => out.push('\n'),
                    Some('t') => out.push('\t'),
                    Some(other) => out.push(other),
                    None => return Err(format!("value {v:?} ends with a backslash")),
                }
            } else {
                out.push(c);
            }
        }
        Ok(out)
    } else {
        Ok(v.to_string())
    }
}

/// The description of a bundled skill (empty if its frontmatter cannot be read; the tests make
/// sure every bundled one can).
pub fn description(skill: &Skill) -> String {
    parse_frontmatter(skill.text)
        .map(|(f, _)| f.description)
        .unwrap_or_default()
}

/// 64-bit FNV-1a: a stable hash of the bytes we wrote, kept in the marker file.
pub fn fnv1a64(bytes: &[u8]) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for b in bytes {
        hash ^= u64::from(*b);
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
    }
    hash
}

/// The marker's content for these bytes: 16 hex digits and a newline.
pub fn marker_text(bytes: &[u8]) -> String {
    format!("{:016x}\n", fnv1a64(bytes))
}

/// Where an installed skill stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    /// The file is the bundled text.
    Installed,
    /// An older text that we wrote and nobody edited: `install` updates it.
    Outdated,
    /// Edited by someone (or not written by us): `install` keeps it unless `--force`.
    Modified,
    /// No file: `install` writes it.
    Missing,
}

impl Status {
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Installed => "installed",
            Status::Outdated => "outdated",
            Status::Modified => "modified",
            Status::Missing => "missing",
        }
    }
}

/// The status from what is on disk: the current file (if any), the marker (if any), and the
/// bundled text.
pub fn classify(current: Option<&[u8]>, marker: Option<&str>, bundled: &[u8]) -> Status {
    let Some(current) = current else {
        return Status::Missing;
    };
    if current == bundled {
        return Status::Installed;
    }
    let ours = marker
        .and_then(|m| u64::from_str_radix(m.trim(), 16).ok())
        .is_some_and(|h| h == fnv1a64(current));
    if ours {
        Status::Outdated
    } else {
        Status::Modified
    }
}

/// `<dir>/<name>/SKILL.md`
pub fn skill_path(dir: &Path, name: &str) -> PathBuf {
    dir.join(name).join(SKILL_FILE)
}

fn marker_path(dir: &Path, name: &str) -> PathBuf {
    dir.join(name).join(MARKER)
}

fn read_optional(path: &Path) -> Result<Option<Vec<u8>>, AppError> {
    match std::fs::read(path) {
        Ok(b) => Ok(Some(b)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(AppError::internal(format!(
            "cannot read {}: {e}",
            path.display()
        ))),
    }
}

/// The status of one bundled skill in `dir`.
pub fn status_in(dir: &Path, skill: &Skill) -> Result<Status, AppError> {
    let current = read_optional(&skill_path(dir, skill.name))?;
    let marker = read_optional(&marker_path(dir, skill.name))?;
    let marker = marker.map(|m| String::from_utf8_lossy(&m).into_owned());
    Ok(classify(
        current.as_deref(),
        marker.as_deref(),
        skill.text.as_bytes(),
    ))
}

/// The skills directory: `--dir`, else `$CLAUDE_CONFIG_DIR/skills`, else `$HOME/.claude/skills`
/// (empty variables count as unset). A relative path is taken from `cwd`.
pub fn skills_dir(
    flag: Option<&Path>,
    claude_config_dir: Option<OsString>,
    home: Option<OsString>,
    cwd: &Path,
) -> Result<PathBuf, AppError> {
    let non_empty = |v: Option<OsString>| v.filter(|s| !s.is_empty()).map(PathBuf::from);
    let dir = match flag {
        Some(p) if p.as_os_str().is_empty() => {
            return Err(AppError::invalid(
                "invalid --dir \"\": give the skills directory, e.g. ~/.claude/skills",
            ))
        }
        Some(p) => p.to_path_buf(),
        None => match (non_empty(claude_config_dir), non_empty(home)) {
            (Some(c), _) => c.join("skills"),
            (None, Some(h)) => h.join(".claude").join("skills"),
            (None, None) => {
                return Err(AppError::invalid(
                    "cannot find Claude Code's skills directory: neither --dir, CLAUDE_CONFIG_DIR nor HOME is set",
                )
                .with_hint("pass --dir DIR"))
            }
        },
    };
    Ok(if dir.is_absolute() {
        dir
    } else {
        cwd.join(dir)
    })
}

/// What `install` did, by skill name.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct InstallReport {
    pub dir: String,
    /// Written where there was none.
    pub installed: Vec<String>,
    /// Outdated files replaced (and, with `--force`, modified ones).
    pub updated: Vec<String>,
    /// Already the bundled text.
    pub unchanged: Vec<String>,
    /// Modified files kept (without `--force`).
    pub skipped: Vec<String>,
}

/// Installs `skills` into `dir`. Modified files are skipped unless `force`; everything else is
/// written (temp file and rename), SKILL.md first and then its marker.
pub fn install(dir: &Path, skills: &[Skill], force: bool) -> Result<InstallReport, AppError> {
    let mut report = InstallReport {
        dir: dir.display().to_string(),
        ..InstallReport::default()
    };
    for skill in skills {
        let status = status_in(dir, skill)?;
        let bytes = skill.text.as_bytes();
        let name = skill.name.to_string();
        match status {
            Status::Installed => {
                // Keep the marker in step so a later version can replace this file.
                let marker = marker_path(dir, skill.name);
                let want = marker_text(bytes);
                if read_optional(&marker)?.as_deref() != Some(want.as_bytes()) {
                    write_atomic(&marker, want.as_bytes())?;
                }
                report.unchanged.push(name);
            }
            Status::Modified if !force => report.skipped.push(name),
            Status::Missing | Status::Outdated | Status::Modified => {
                let folder = dir.join(skill.name);
                std::fs::create_dir_all(&folder).map_err(|e| {
                    AppError::internal(format!("cannot create {}: {e}", folder.display()))
                })?;
                write_atomic(&skill_path(dir, skill.name), bytes)?;
                write_atomic(&marker_path(dir, skill.name), marker_text(bytes).as_bytes())?;
                if status == Status::Missing {
                    report.installed.push(name);
                } else {
                    report.updated.push(name);
                }
            }
        }
    }
    Ok(report)
}

/// The Claude Code plugin (and the local marketplace that lists it) both are called.
pub const PLUGIN_NAME: &str = "orchestratectl";

/// The bundled skills as a Claude Code plugin that is its own local marketplace:
/// `DIR/.claude-plugin/{plugin.json,marketplace.json}`, `DIR/README.md` and the skills under
/// `DIR/skills/` (installed as [`install`] does, so an edited skill is kept unless `force`).
/// `claude plugin marketplace add DIR` then `claude plugin install orchestratectl@orchestratectl`
/// install it, offline.
pub fn install_plugin(dir: &Path, force: bool) -> Result<InstallReport, AppError> {
    let version = env!("CARGO_PKG_VERSION");
    let description = "Run AI coding agents in their own git worktrees with orchestratectl: \
                       spin-offs, fan-outs, DAGs, merges, from inside Claude Code";
    let manifest = serde_json::json!({
        "name": PLUGIN_NAME,
        "version": version,
        "description": description,
        "author": {"name": "orchestratectl"},
        "license": env!("CARGO_PKG_LICENSE"),
        "keywords": ["git", "worktree", "agents", "orchestration"],
    });
    let marketplace = serde_json::json!({
        "name": PLUGIN_NAME,
        "owner": {"name": "orchestratectl"},
        "description": "The orchestratectl plugin, written by `orchestratectl skill install --plugin`",
        "plugins": [{
            "name": PLUGIN_NAME,
            "source": "./",
            "description": description,
            "version": version,
        }],
    });
    let meta = dir.join(".claude-plugin");
    std::fs::create_dir_all(&meta)
        .map_err(|e| AppError::internal(format!("cannot create {}: {e}", meta.display())))?;
    let pretty = |v: &serde_json::Value| format!("{:#}\n", v);
    write_atomic(&meta.join("plugin.json"), pretty(&manifest).as_bytes())?;
    write_atomic(
        &meta.join("marketplace.json"),
        pretty(&marketplace).as_bytes(),
    )?;
    let mut readme = format!(
        "# orchestratectl {version} for Claude Code\n\nThe skills bundled with orchestratectl, as a Claude Code plugin. They drive the \
         `orchestratectl` CLI (which must be on PATH) to run AI coding agents in their own git worktrees, \
         merge their work back, fan out and run DAGs of tasks. Each skill declares the commands it runs \
         (`allowed-tools`), so it does not stop to ask. Regenerate with `orchestratectl skill install --plugin`.\n\n\
         Install, offline:\n\n```sh\nclaude plugin marketplace add {}\nclaude plugin install {PLUGIN_NAME}@{PLUGIN_NAME}\n```\n\n",
        dir.display()
    );
    for skill in SKILLS {
        readme.push_str(&format!(
            "- `/{PLUGIN_NAME}:{}`: {}\n",
            skill.name,
            description_of(skill)
        ));
    }
    write_atomic(&dir.join("README.md"), readme.as_bytes())?;
    let skills = dir.join("skills");
    std::fs::create_dir_all(&skills)
        .map_err(|e| AppError::internal(format!("cannot create {}: {e}", skills.display())))?;
    install(&skills, SKILLS, force)
}

fn description_of(skill: &Skill) -> String {
    let d = description(skill);
    match d.find(". ") {
        Some(i) => d[..=i].to_string(),
        None => d,
    }
}

/// Writes `path` through a temp file in the same directory and a rename.
fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), AppError> {
    let fail =
        |e: std::io::Error| AppError::internal(format!("cannot write {}: {e}", path.display()));
    let file_name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp = path.with_file_name(format!(".{file_name}.tmp-{}", std::process::id()));
    let result = (|| {
        // Never through whatever is at the temp name (a symlink left there would otherwise
        // be followed and its target overwritten): remove it, then create the file afresh.
        let _ = std::fs::remove_file(&tmp);
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)
    })();
    if let Err(e) = result {
        let _ = std::fs::remove_file(&tmp);
        return Err(fail(e));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const EXPECTED: [&str; 13] = [
        "orchestratectl-overview",
        "octl-run-overview",
        "octl-spawn-spinoff",
        "worktree-code",
        "worktree-spinoff",
        "worktree-merge",
        "worktree-research",
        "worktree-bugfix",
        "worktree-technical-decision",
        "worktree-make-skill",
        "worktree-orchestrated",
        "fan-out",
        "orchestrate",
    ];

    fn is_skill_name(s: &str) -> bool {
        !s.is_empty()
            && s.len() <= 64
            && s.split('-').all(|part| {
                !part.is_empty()
                    && part
                        .bytes()
                        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
            })
    }

    /// A value Claude Code's YAML parser reads back as the same plain string.
    fn plain_yaml(v: &str) -> bool {
        !v.contains(": ")
            && !v.contains(" #")
            && !v.ends_with(':')
            && !v.starts_with([
                '[', ']', '{', '}', '&', '*', '!', '|', '>', '\'', '"', '%', '@', '`', '#', ',',
                '?', '-',
            ])
    }

    #[test]
    fn exactly_the_thirteen_skills_are_bundled_sorted() {
        let mut expected = EXPECTED.to_vec();
        expected.sort();
        let names: Vec<&str> = SKILLS.iter().map(|s| s.name).collect();
        assert_eq!(names, expected);
    }

    #[test]
    fn every_bundled_skill_is_valid_for_claude_code() {
        for skill in SKILLS {
            let (fm, body) =
                parse_frontmatter(skill.text).unwrap_or_else(|e| panic!("{}: {e}", skill.name));
            assert_eq!(fm.name, skill.name, "name must equal the folder");
            assert!(is_skill_name(&fm.name), "{}: bad name", skill.name);
            let len = fm.description.chars().count();
            assert!(
                (1..=1024).contains(&len),
                "{}: description has {len} characters",
                skill.name
            );
            assert!(
                plain_yaml(&fm.description),
                "{}: the description is not a plain YAML string",
                skill.name
            );
            if let Some(hint) = &fm.argument_hint {
                assert!(!hint.is_empty(), "{}: empty argument-hint", skill.name);
            }
            assert!(!body.trim().is_empty(), "{}: empty body", skill.name);
            // Every skill runs orchestratectl and says so, or Claude Code stops to ask.
            assert!(
                fm.allowed_tools
                    .iter()
                    .any(|t| t == "Bash(orchestratectl *)"),
                "{}: allowed-tools must declare Bash(orchestratectl *): {:?}",
                skill.name,
                fm.allowed_tools
            );
            for tool in &fm.allowed_tools {
                let ok = tool.starts_with("Bash(")
                    && tool.ends_with(')')
                    && !tool.contains("Bash(git *)");
                assert!(ok, "{}: {tool:?} is not a narrow Bash(…) rule", skill.name);
            }
            assert_eq!(description(skill), fm.description);
        }
    }

    #[test]
    fn skill_names() {
        for good in ["a", "fan-out", "octl-run-overview", "x1-2"] {
            assert!(is_skill_name(good), "{good}");
        }
        let long = "a".repeat(65);
        for bad in ["", "-a", "a-", "a--b", "A", "a_b", "a b", long.as_str()] {
            assert!(!is_skill_name(bad), "{bad}");
        }
    }

    #[test]
    fn frontmatter_parsing() {
        let text = "---\nname: demo\ndescription: Does things. Use when asked\nargument-hint: <task>\n---\n\n# Body\n";
        let (fm, body) = parse_frontmatter(text).unwrap();
        assert_eq!(fm.name, "demo");
        assert_eq!(fm.description, "Does things. Use when asked");
        assert_eq!(fm.argument_hint.as_deref(), Some("<task>"));
        assert_eq!(body, "\n# Body\n");

        let text = "---\r\nname: 'it''s'\r\ndescription: \"a \\\"b\\\"\"\r\nallowed-tools:\r\n  - Bash\r\n# comment\r\n---\r\nbody";
        let (fm, body) = parse_frontmatter(text).unwrap();
        assert_eq!(fm.name, "it's");
        assert_eq!(fm.description, "a \"b\"");
        assert_eq!(fm.argument_hint, None);
        assert_eq!(fm.allowed_tools, vec!["Bash".to_string()]);
        assert_eq!(body, "body");
        let text = "---\nname: d\ndescription: x\nallowed-tools: Bash(orchestratectl *), Bash(git -C * add *),Read\n---\n";
        let (fm, _) = parse_frontmatter(text).unwrap();
        assert_eq!(
            fm.allowed_tools,
            ["Bash(orchestratectl *)", "Bash(git -C * add *)", "Read"]
        );

        for (bad, why) in [
            ("name: x\n", "no frontmatter"),
            ("---\nname: x\ndescription: y\n", "not closed"),
            ("---\ndescription: y\n---\n", "no `name`"),
            ("---\nname: x\n---\n", "no `description`"),
            ("---\nname: x\nname: y\ndescription: z\n---\n", "twice"),
            ("---\nname: x\ndescription: y\n  more\n---\n", "one-line"),
            ("---\nname x\n---\n", "key: value"),
        ] {
            let err = parse_frontmatter(bad).unwrap_err();
            assert!(err.contains(why), "{bad:?}: {err}");
        }
    }

    #[test]
    fn fnv1a_is_the_standard_one() {
        assert_eq!(fnv1a64(b""), 0xcbf29ce484222325);
        assert_eq!(fnv1a64(b"a"), 0xaf63dc4c8601ec8c);
        assert_eq!(fnv1a64(b"foobar"), 0x85944171f73967e8);
        assert_eq!(marker_text(b"a"), "af63dc4c8601ec8c\n");
    }

    #[test]
    fn classification() {
        let old = b"old text";
        let new = b"new text";
        let marker_old = marker_text(old);
        assert_eq!(classify(None, None, new), Status::Missing);
        assert_eq!(classify(Some(new), None, new), Status::Installed);
        assert_eq!(
            classify(Some(old), Some(&marker_old), new),
            Status::Outdated
        );
        assert_eq!(
            classify(Some(b"edited"), Some(&marker_old), new),
            Status::Modified
        );
        assert_eq!(classify(Some(old), None, new), Status::Modified);
        assert_eq!(classify(Some(old), Some("garbage"), new), Status::Modified);
    }

    const V1: [Skill; 2] = [
        Skill {
            name: "one",
            text: "---\nname: one\ndescription: v1\n---\nbody\n",
        },
        Skill {
            name: "two",
            text: "---\nname: two\ndescription: v1\n---\nbody\n",
        },
    ];
    const V2: [Skill; 2] = [
        Skill {
            name: "one",
            text: "---\nname: one\ndescription: v2\n---\nbody\n",
        },
        Skill {
            name: "two",
            text: "---\nname: two\ndescription: v2\n---\nbody\n",
        },
    ];

    fn files_in(dir: &Path) -> Vec<String> {
        let mut out = Vec::new();
        for entry in walk(dir) {
            out.push(
                entry
                    .strip_prefix(dir)
                    .unwrap()
                    .to_string_lossy()
                    .into_owned(),
            );
        }
        out.sort();
        out
    }

    fn walk(dir: &Path) -> Vec<PathBuf> {
        let mut out = Vec::new();
        for e in std::fs::read_dir(dir).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                out.extend(walk(&p));
            } else {
                out.push(p);
            }
        }
        out
    }

    #[test]
    fn install_update_keep_and_force() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("skills");

        // Fresh: everything missing, then installed.
        assert_eq!(status_in(&dir, &V1[0]).unwrap(), Status::Missing);
        let r = install(&dir, &V1, false).unwrap();
        assert_eq!(r.installed, ["one", "two"]);
        assert!(r.updated.is_empty() && r.skipped.is_empty() && r.unchanged.is_empty());
        assert_eq!(
            files_in(&dir),
            [
                "one/.orchestratectl-installed",
                "one/SKILL.md",
                "two/.orchestratectl-installed",
                "two/SKILL.md"
            ]
        );
        assert_eq!(
            std::fs::read_to_string(dir.join("one/SKILL.md")).unwrap(),
            V1[0].text
        );
        assert_eq!(status_in(&dir, &V1[0]).unwrap(), Status::Installed);

        // Again: nothing to do.
        let r = install(&dir, &V1, false).unwrap();
        assert_eq!(r.unchanged, ["one", "two"]);

        // A new version: ours are outdated; a user edits `two`, which becomes modified.
        std::fs::write(dir.join("two/SKILL.md"), "my own version\n").unwrap();
        assert_eq!(status_in(&dir, &V2[0]).unwrap(), Status::Outdated);
        assert_eq!(status_in(&dir, &V2[1]).unwrap(), Status::Modified);
        let r = install(&dir, &V2, false).unwrap();
        assert_eq!(r.updated, ["one"]);
        assert_eq!(r.skipped, ["two"]);
        assert_eq!(
            std::fs::read_to_string(dir.join("one/SKILL.md")).unwrap(),
            V2[0].text
        );
        assert_eq!(
            std::fs::read_to_string(dir.join("two/SKILL.md")).unwrap(),
            "my own version\n",
            "an edited file is never overwritten without --force"
        );
        assert_eq!(status_in(&dir, &V2[0]).unwrap(), Status::Installed);

        // --force overwrites the edited one.
        let r = install(&dir, &V2, true).unwrap();
        assert_eq!(r.updated, ["two"]);
        assert_eq!(r.unchanged, ["one"]);
        assert_eq!(
            std::fs::read_to_string(dir.join("two/SKILL.md")).unwrap(),
            V2[1].text
        );
        // No temp files or anything else left behind.
        assert_eq!(files_in(&dir).len(), 4, "{:?}", files_in(&dir));

        // A hand-copied identical file gets a marker, so it can be updated later.
        let other = tmp.path().join("other");
        std::fs::create_dir_all(other.join("one")).unwrap();
        std::fs::write(other.join("one/SKILL.md"), V1[0].text).unwrap();
        let r = install(&other, &V1[..1], false).unwrap();
        assert_eq!(r.unchanged, ["one"]);
        assert_eq!(status_in(&other, &V2[0]).unwrap(), Status::Outdated);
    }

    #[test]
    fn the_skills_directory() {
        let cwd = Path::new("/work");
        let d = |flag: Option<&str>, c: Option<&str>, h: Option<&str>| {
            skills_dir(
                flag.map(Path::new),
                c.map(Into::into),
                h.map(Into::into),
                cwd,
            )
        };
        assert_eq!(
            d(Some("x"), Some("/c"), Some("/h")).unwrap(),
            Path::new("/work/x")
        );
        assert_eq!(
            d(None, Some("/c"), Some("/h")).unwrap(),
            Path::new("/c/skills")
        );
        assert_eq!(
            d(None, Some(""), Some("/h")).unwrap(),
            Path::new("/h/.claude/skills")
        );
        assert!(d(None, None, None).is_err());
        assert!(d(Some(""), None, Some("/h")).is_err());
    }
}
