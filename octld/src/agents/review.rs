//! What an agent is told when it starts, and how a person's review reaches it: as its next
//! message (typed into a live session, or the prompt its resumed conversation goes on with),
//! or after its task in a new attempt's prompt. Every review is also written out whole to
//! `reviews/<NODE>-<ROUND>.md` in the run's directory (`$OCTL_REVIEW_FILE`), from the log.

use std::path::{Path, PathBuf};

use octl_proto::state::{Node, Review};

use super::{Profile, ProfileKind, Session, RESUME_PROMPT};

/// The prompt for `node`'s next start in `session` by `profile`: the review it was sent back
/// with (after its task when the agent starts afresh), the prompt to go on after an
/// interruption, or its task. A shell agent's task is a script: it stays as it is, and the
/// script reads the review in `$OCTL_REVIEW_FILE`.
pub fn prompt(profile: &Profile, node: &Node, session: Option<&Session>, run_dir: &Path) -> String {
    let resumed = session.is_some_and(|s| s.resume);
    let task = node.task.as_deref().unwrap_or_default();
    if matches!(profile.kind, ProfileKind::Shell) {
        return task.to_string();
    }
    match (due(node), resumed) {
        (Some(r), true) => message(r, &file(run_dir, &node.id, r.round)),
        (Some(r), false) => format!(
            "{task}\n\nYou worked on this task before, in this worktree and branch (see `git log`); a person reviewed that work.\n\n{}",
            message(r, &file(run_dir, &node.id, r.round))
        ),
        (None, true) => RESUME_PROMPT.to_string(),
        (None, false) => task.to_string(),
    }
}

/// The review `node` is to be given at its next start, if any.
pub fn due(node: &Node) -> Option<&Review> {
    let round = node.review_due?;
    node.reviews.iter().find(|r| r.round == round)
}

/// Where round `round` of `node`'s reviews is written.
pub fn file(run_dir: &Path, node: &str, round: u32) -> PathBuf {
    run_dir.join("reviews").join(format!("{node}-{round}.md"))
}

/// Writes `review` whole to its [`file`] (again, identically, after a crash) and returns it.
pub fn write(run_dir: &Path, node: &str, review: &Review) -> std::io::Result<PathBuf> {
    let path = file(run_dir, node, review.round);
    std::fs::create_dir_all(path.parent().expect("in reviews/"))?;
    let mut text = format!("# Review {} of node {node}\n\n", review.round);
    for c in &review.comments {
        text.push_str(&format!("- {c}\n"));
    }
    if let Some(t) = &review.text {
        if !review.comments.is_empty() {
            text.push('\n');
        }
        text.push_str(t);
        if !t.ends_with('\n') {
            text.push('\n');
        }
    }
    std::fs::write(&path, text)?;
    Ok(path)
}

/// The review as a message of several lines.
fn message(review: &Review, file: &Path) -> String {
    let mut m = format!(
        "A person reviewed your work (review {}) and asks for these changes before it is merged:\n",
        review.round
    );
    for c in &review.comments {
        m.push_str(&format!("- {c}\n"));
    }
    if let Some(t) = &review.text {
        m.push('\n');
        m.push_str(t.trim_end());
        m.push('\n');
    }
    m.push_str(&format!(
        "\n(The review is also in {}.) Make the changes in this worktree, commit them, and report done again as before.",
        file.display()
    ));
    m
}

/// The review as one line to type into a live session (which would take a newline as the
/// end of the message), at most `max` bytes: its comments, or only where to read it when
/// they do not fit.
pub fn line(review: &Review, file: &Path, max: usize) -> String {
    let end = format!(
        " (the whole review is in {}). Make the changes, commit them, and report done again.",
        file.display()
    );
    let said: Vec<String> = review
        .comments
        .iter()
        .map(|c| c.split_whitespace().collect::<Vec<_>>().join(" "))
        .collect();
    let head = format!(
        "Review {}: please change this before it is merged: ",
        review.round
    );
    let full = format!("{head}{}{end}", said.join(" | "));
    if !said.is_empty() && full.len() <= max {
        return full;
    }
    format!(
        "Review {}: a person asks for changes before it is merged. Read {}, make the changes, commit them, and report done again.",
        review.round,
        file.display()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn review(comments: &[&str], text: Option<&str>) -> Review {
        Review {
            round: 2,
            comments: comments.iter().map(|c| c.to_string()).collect(),
            text: text.map(str::to_string),
            by: "human".into(),
            at: "t".into(),
            way: None,
            head: None,
            approve: false,
        }
    }

    #[test]
    fn a_review_is_the_next_message_or_follows_the_task() {
        let mut node: Node = serde_json::from_value(serde_json::json!({
            "id": "a", "state": "pending", "branch": "b", "worktree": "w", "agent": null,
            "deps": [], "created_at": "t", "updated_at": "t", "task": "fix the parser",
        }))
        .unwrap();
        let dir = Path::new("/runs/r");
        let config = crate::config::Config::default();
        let claude = super::super::resolve(&config, None).unwrap();
        let prompt = |node: &Node, s| prompt(&claude, node, s, dir);
        assert_eq!(prompt(&node, None), "fix the parser");
        let resumed = Session {
            id: "s".into(),
            resume: true,
        };
        assert_eq!(prompt(&node, Some(&resumed)), RESUME_PROMPT);
        node.reviews.push(review(
            &["src/x.rs:42: use the helper"],
            Some("Also:\nmore"),
        ));
        node.review_due = Some(2);
        let p = prompt(&node, Some(&resumed));
        assert!(
            p.starts_with("A person reviewed your work (review 2)"),
            "{p}"
        );
        assert!(
            p.contains("- src/x.rs:42: use the helper\n\nAlso:\nmore\n"),
            "{p}"
        );
        assert!(p.contains("/runs/r/reviews/a-2.md"), "{p}");
        let fresh = prompt(&node, None);
        assert!(fresh.starts_with("fix the parser\n\nYou worked on this task before"));
        assert!(fresh.contains("- src/x.rs:42: use the helper"));
        // A script stays a script.
        let shell = super::super::resolve(&config, Some("shell")).unwrap();
        assert_eq!(super::prompt(&shell, &node, None, dir), "fix the parser");
    }

    #[test]
    fn a_typed_review_is_one_line_within_its_limit() {
        let f = Path::new("/r/reviews/a-2.md");
        let r = review(&["a.rs:1: x\nsecond line", "b.rs: y"], None);
        let l = line(&r, f, 4096);
        assert!(!l.contains('\n'));
        assert!(l.contains("a.rs:1: x second line | b.rs: y"), "{l}");
        let short = line(&r, f, 40);
        assert!(short.contains("Read /r/reviews/a-2.md"), "{short}");
        // Only a text: where to read it.
        assert!(line(&review(&[], Some("long")), f, 4096).contains("Read /r/reviews/a-2.md"));
    }

    #[test]
    fn the_file_holds_the_whole_review() {
        let dir = tempfile::tempdir().unwrap();
        let p = write(dir.path(), "a", &review(&["one", "two"], Some("body"))).unwrap();
        assert_eq!(
            std::fs::read_to_string(p).unwrap(),
            "# Review 2 of node a\n\n- one\n- two\n\nbody\n"
        );
    }
}
