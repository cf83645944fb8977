//! Text given as a file instead of an argument (`--task-file PATH`, `--body-file PATH`), or
//! `-` for standard input: for long prompts that do not fit a shell's quoting. The text is
//! sent exactly as read; only its size and encoding are checked here (the daemon checks again).

use std::io::Read;
use std::path::Path;

use octl_proto::AppError;

/// The text of `flag`: the argument as given, or the file's (or stdin's) content. The two
/// are mutually exclusive (clap enforces it; this says so again for callers that build args
/// by hand). At most `max` bytes of UTF-8.
pub fn text_or_file(
    flag: &str,
    given: Option<String>,
    file: Option<&Path>,
    max: usize,
) -> Result<Option<String>, AppError> {
    match (given, file) {
        (Some(_), Some(_)) => Err(AppError::invalid(format!(
            "{flag} is given twice: as text and as a file; give one of them"
        ))),
        (given, None) => Ok(given),
        (None, Some(path)) if path.as_os_str() == "-" => {
            read_text(flag, "standard input", std::io::stdin().lock(), max).map(Some)
        }
        (None, Some(path)) => {
            let shown = path.display().to_string();
            let file = std::fs::File::open(path).map_err(|e| match e.kind() {
                std::io::ErrorKind::NotFound => {
                    AppError::not_found(format!("invalid {flag} {shown:?}: no such file"))
                }
                _ => AppError::invalid(format!("invalid {flag} {shown:?}: {e}")),
            })?;
            let is_dir = file.metadata().map(|m| m.is_dir()).unwrap_or(false);
            if is_dir {
                return Err(AppError::invalid(format!(
                    "invalid {flag} {shown:?}: it is a directory; give a text file, or - for standard input"
                )));
            }
            read_text(flag, &format!("{shown:?}"), file, max).map(Some)
        }
    }
}

/// Reads at most `max` bytes of UTF-8 from `from` (named `what` in errors); more is refused,
/// without reading the rest.
pub fn read_text(flag: &str, what: &str, from: impl Read, max: usize) -> Result<String, AppError> {
    let mut bytes = Vec::new();
    from.take(max as u64 + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| AppError::invalid(format!("invalid {flag} {what}: cannot read it: {e}")))?;
    if bytes.len() > max {
        return Err(AppError::invalid(format!(
            "invalid {flag} {what}: more than {max} bytes; the limit is {max} bytes ({} KiB)",
            max / 1024
        )));
    }
    String::from_utf8(bytes).map_err(|e| {
        AppError::invalid(format!(
            "invalid {flag} {what}: not UTF-8 text (invalid byte at offset {})",
            e.utf8_error().valid_up_to()
        ))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use octl_proto::ErrorKind;

    #[test]
    fn files_and_their_limits() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("task.md");
        std::fs::write(&path, "fix it\n  keep 'quotes' and $vars\n").unwrap();
        let text = text_or_file("--task-file", None, Some(&path), 100).unwrap();
        assert_eq!(text.as_deref(), Some("fix it\n  keep 'quotes' and $vars\n"));
        assert_eq!(
            text_or_file("--task-file", Some("x".into()), None, 100).unwrap(),
            Some("x".into())
        );
        assert_eq!(text_or_file("--task-file", None, None, 100).unwrap(), None);
        let both = text_or_file("--task-file", Some("x".into()), Some(&path), 100).unwrap_err();
        assert_eq!(both.kind, ErrorKind::InvalidParams);

        let missing =
            text_or_file("--task-file", None, Some(&dir.path().join("no")), 100).unwrap_err();
        assert_eq!(missing.kind, ErrorKind::NotFound);
        assert!(
            missing.message.contains("no such file"),
            "{}",
            missing.message
        );
        let is_dir = text_or_file("--task-file", None, Some(dir.path()), 100).unwrap_err();
        assert!(is_dir.message.contains("directory"), "{}", is_dir.message);

        let big = read_text("--task-file", "standard input", &[b'a'; 101][..], 100).unwrap_err();
        assert_eq!(big.kind, ErrorKind::InvalidParams);
        assert!(
            big.message.contains("limit is 100 bytes"),
            "{}",
            big.message
        );
        assert_eq!(
            read_text("--task-file", "x", &[b'a'; 100][..], 100)
                .unwrap()
                .len(),
            100
        );
        let bad = read_text("--task-file", "x", &b"ok\xff"[..], 100).unwrap_err();
        assert!(
            bad.message
                .contains("not UTF-8 text (invalid byte at offset 2)"),
            "{}",
            bad.message
        );
    }
}
