//! The git program and repository queries.

use octl_proto::ErrorKind;

use super::*;

#[test]
fn parses_versions() {
    let v = |s| parse_version(s).unwrap();
    assert_eq!(
        v("git version 2.47.3\n"),
        Version {
            major: 2,
            minor: 47,
            patch: 3
        }
    );
    assert_eq!(
        v("git version 2.39.3 (Apple Git-146)"),
        Version {
            major: 2,
            minor: 39,
            patch: 3
        }
    );
    assert_eq!(
        v("git version 2.45.1.windows.1"),
        Version {
            major: 2,
            minor: 45,
            patch: 1
        }
    );
    assert_eq!(
        v("git version 2.50.0-rc1"),
        Version {
            major: 2,
            minor: 50,
            patch: 0
        }
    );
    assert_eq!(
        v("git version 3.0"),
        Version {
            major: 3,
            minor: 0,
            patch: 0
        }
    );
    assert!(parse_version("hg 6.1").is_none());
    assert!(v("git version 2.37.9") < MIN_VERSION);
    assert!(v("git version 2.38.0") >= MIN_VERSION);
}

#[test]
fn missing_program_is_distinct() {
    let git = Git::new("/").with_program("/nonexistent/octl-no-such-git");
    let err = git.version().unwrap_err();
    assert!(matches!(err, GitError::Missing { .. }), "{err:?}");
    assert_eq!(err.kind(), ErrorKind::ToolMissing);
}

#[test]
fn version_and_repository_queries() {
    let f = Fixture::new();
    assert!(f.git.check_version().unwrap() >= MIN_VERSION);
    let sub = f.repo().join("sub");
    fs::create_dir(&sub).unwrap();
    assert_eq!(f.git.at(&sub).toplevel().unwrap(), f.repo());
    assert_eq!(f.git.current_branch().unwrap(), "main");
    assert_eq!(f.git.common_dir().unwrap(), f.repo().join(".git"));
    let head = f.git.head().unwrap();
    assert_eq!(f.git.resolve_commit("main").unwrap(), head);
    assert!(matches!(
        f.git.resolve_commit("no-such-branch"),
        Err(GitError::UnknownRevision { .. })
    ));
    let outside = f.root.join("outside");
    fs::create_dir(&outside).unwrap();
    let err = f.git.at(&outside).toplevel().unwrap_err();
    assert!(matches!(err, GitError::NotARepo { .. }), "{err:?}");

    f.git.run(&["checkout", "-q", "--detach"]);
    assert!(matches!(
        f.git.current_branch(),
        Err(GitError::DetachedHead { .. })
    ));
}
