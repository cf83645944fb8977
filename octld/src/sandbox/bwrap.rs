//! The bubblewrap command line that gives an agent its view of the machine (docs/SECURITY.md,
//! "What a sandboxed agent sees"). Pure: [`View`] in, argv out; what it names is made by
//! [`super::prepare`].

use std::path::{Path, PathBuf};

use octl_proto::sandbox::SandboxNetwork;

/// The system's own directories, read-only where they exist (a symlink such as `/bin` →
/// `usr/bin` stays a symlink).
pub const SYSTEM: &[&str] = &[
    "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/opt",
];

/// The files of the worktree's own git directory shown read-only (with its `.git` file):
/// where the repository is, what the worktree is, which branch it has.
pub const LINKS: &[&str] = &["commondir", "gitdir", "HEAD"];

/// Everything the view is made of, each an absolute path on this machine.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct View {
    /// The node's worktree: read-write, the agent's working directory.
    pub worktree: PathBuf,
    /// The repository's git directory (`.git` of its main worktree): read-only, but for
    /// `objects` (new objects are added, content-addressed) and what follows.
    pub git_common: PathBuf,
    /// The worktree's own git directory (`<git_common>/worktrees/<name>`): its HEAD, index
    /// and logs, read-write.
    pub git_worktree: PathBuf,
    /// The directory of the node's branch ref (`<git_common>/refs/heads/octl/<RUN>`) and of
    /// its reflog, each shown as a private copy holding the node's own ref alone: the agent
    /// moves its branch there, never its siblings' ([`super::harvest`] brings it back).
    pub refs_dir: (PathBuf, PathBuf),
    pub logs_dir: (PathBuf, PathBuf),
    /// The user's home, shown as the node's private one (`(home, private)`).
    pub home: (PathBuf, PathBuf),
    /// `/tmp`, shown as the node's private temporary directory.
    pub tmp: PathBuf,
    /// The daemon's home, shown as the node's control directory: the node's socket as
    /// `octld.sock` and nothing else of the home (no other run, no user socket).
    pub octl_home: (PathBuf, PathBuf),
    /// Read-only: the toolchains (every `PATH` directory), the agent's program, the
    /// daemon's binaries, and `[sandbox] read_only`.
    pub read_only: Vec<PathBuf>,
    /// Read-write: `[sandbox] read_write`.
    pub read_write: Vec<PathBuf>,
    /// Copies of the agent CLI's configuration outside the home, each shown at its path
    /// (`(path, copy)`).
    pub copies: Vec<(PathBuf, PathBuf)>,
    pub network: SandboxNetwork,
    /// `network = "allow"`: the relay that starts the agent inside ([`super::proxy`]).
    pub relay: Option<Relay>,
}

/// How a sandbox whose network is `allow` reaches the daemon's proxy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Relay {
    /// `octld` (its hidden `sandbox-relay`), shown read-only with the daemon's binaries.
    pub program: PathBuf,
    /// The node's proxy directory, shown at [`super::proxy::IN_SANDBOX_DIR`].
    pub dir: PathBuf,
    /// `(listen, target)`: each loopback target of `[sandbox] allow`, at its own address.
    pub forwards: Vec<(String, String)>,
    /// The loopback port `HTTPS_PROXY` names.
    pub http_port: u16,
}

/// The `HTTPS_PROXY` port: 3128, or the next that no forward listens on.
pub fn http_port(forwards: &[(String, String)]) -> u16 {
    let taken = |p: u16| {
        forwards.iter().any(|(listen, _)| {
            listen
                .rsplit_once(':')
                .is_some_and(|(_, q)| q == p.to_string())
        })
    };
    (3128..u16::MAX).find(|p| !taken(*p)).unwrap_or(3128)
}

fn s(p: &Path) -> String {
    p.display().to_string()
}

/// `bwrap …` up to `--`; the agent's argv follows it. Binds come parents first, so a path
/// inside another bound one (the worktree in the daemon's home, a repository in the home)
/// is mounted over what its parent shows.
pub fn argv(bwrap: &Path, v: &View, system: &[(&str, Option<PathBuf>)]) -> Vec<String> {
    let mut out = vec![s(bwrap), "--die-with-parent".into(), "--unshare-all".into()];
    if v.network == SandboxNetwork::Host {
        out.push("--share-net".into());
    }
    out.extend(["--hostname".into(), "octl-sandbox".into()]);
    // The system, read-only: a symlink (`/bin` → `usr/bin`) as the same symlink.
    for (dir, link) in system {
        match link {
            Some(target) => out.extend(["--symlink".into(), s(target), dir.to_string()]),
            None => out.extend(["--ro-bind".into(), dir.to_string(), dir.to_string()]),
        }
    }
    out.extend([
        "--proc".into(),
        "/proc".into(),
        "--dev".into(),
        "/dev".into(),
        "--bind".into(),
        s(&v.tmp),
        "/tmp".into(),
    ]);
    // Every other bind, sorted by depth so a parent is mounted before what is inside it.
    let mut binds: Vec<(&'static str, &Path, &Path)> = vec![
        ("--bind", &v.home.1, &v.home.0),
        ("--ro-bind", &v.git_common, &v.git_common),
        ("--bind", &v.git_worktree, &v.git_worktree),
        ("--bind", &v.refs_dir.1, &v.refs_dir.0),
        ("--bind", &v.logs_dir.1, &v.logs_dir.0),
        ("--bind", &v.octl_home.1, &v.octl_home.0),
        ("--bind", &v.worktree, &v.worktree),
    ];
    let objects = v.git_common.join("objects");
    binds.push(("--bind", &objects, &objects));
    // New objects are written loose; the packs (the repository's history) and `info`
    // (`alternates`) stay read-only, so an agent adds to the store but cannot empty it.
    let (packs, info) = (objects.join("pack"), objects.join("info"));
    binds.push(("--ro-bind-try", &packs, &packs));
    binds.push(("--ro-bind-try", &info, &info));
    // The links that say which repository and branch the worktree is, read-only over
    // themselves: the daemon runs git in the worktree as the user, and a `.git` or
    // `commondir` the agent pointed at a git directory of its own (its config's
    // `core.fsmonitor`, its hooks) would run the agent's code outside the sandbox; a `HEAD`
    // it pointed at `main` would have the daemon commit there.
    let links: Vec<PathBuf> = [v.worktree.join(".git")]
        .into_iter()
        .chain(LINKS.iter().map(|l| v.git_worktree.join(l)))
        .collect();
    for p in &links {
        binds.push(("--ro-bind", p, p));
    }
    for p in &v.read_only {
        binds.push(("--ro-bind-try", p, p));
    }
    for p in &v.read_write {
        binds.push(("--bind-try", p, p));
    }
    for (at, copy) in &v.copies {
        binds.push(("--bind", copy, at));
    }
    let proxy_dir = Path::new(super::proxy::IN_SANDBOX_DIR);
    if let Some(r) = &v.relay {
        binds.push(("--ro-bind", &r.dir, proxy_dir));
    }
    // Stable: equal depths keep the order above (the worktree after the daemon's home).
    binds.sort_by_key(|(_, _, at)| at.components().count());
    for (how, from, at) in binds {
        out.extend([how.to_string(), s(from), s(at)]);
    }
    // The daemon's home, as the agent sees it, is read-only: its socket is connected to,
    // never replaced (what is mounted inside it keeps its own mode).
    out.extend(["--remount-ro".into(), s(&v.octl_home.0)]);
    out.extend([
        "--chdir".into(),
        s(&v.worktree),
        // Inside, the daemon is not started again by a client that finds no answer.
        "--setenv".into(),
        "OCTL_NO_AUTOSTART".into(),
        "1".into(),
        "--setenv".into(),
        "OCTL_SANDBOX".into(),
        "bwrap".into(),
    ]);
    let Some(r) = &v.relay else {
        out.push("--".into());
        return out;
    };
    // Clients that honour the proxy variables reach the allowed names through the relay;
    // the loopback targets are its forwards, reached directly.
    let proxy = format!("http://127.0.0.1:{}", r.http_port);
    for var in ["HTTPS_PROXY", "HTTP_PROXY", "https_proxy", "http_proxy"] {
        out.extend(["--setenv".into(), var.into(), proxy.clone()]);
    }
    for var in ["NO_PROXY", "no_proxy"] {
        out.extend(["--setenv".into(), var.into(), "localhost,127.0.0.1".into()]);
    }
    out.extend([
        "--".into(),
        s(&r.program),
        "sandbox-relay".into(),
        "--proxy".into(),
        s(&proxy_dir.join(super::proxy::SOCKET)),
    ]);
    for (listen, target) in &r.forwards {
        out.extend(["--listen".into(), format!("{listen}={target}")]);
    }
    out.extend([
        "--http-proxy".into(),
        format!("127.0.0.1:{}", r.http_port),
        "--".into(),
    ]);
    out
}

/// The system directories as this machine has them: each that exists, a symlink as its
/// target.
pub fn system_dirs() -> Vec<(&'static str, Option<PathBuf>)> {
    SYSTEM
        .iter()
        .filter_map(|d| {
            let meta = std::fs::symlink_metadata(d).ok()?;
            Some(if meta.file_type().is_symlink() {
                (*d, std::fs::read_link(d).ok())
            } else {
                (*d, None)
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn view() -> View {
        let p = PathBuf::from;
        View {
            worktree: p("/h/.octl/worktrees/R/n"),
            git_common: p("/h/src/app/.git"),
            git_worktree: p("/h/src/app/.git/worktrees/n"),
            refs_dir: (
                p("/h/src/app/.git/refs/heads/octl/R"),
                p("/h/.octl/sandboxes/R/n/refs"),
            ),
            logs_dir: (
                p("/h/src/app/.git/logs/refs/heads/octl/R"),
                p("/h/.octl/sandboxes/R/n/logs"),
            ),
            home: (p("/h"), p("/h/.octl/sandboxes/R/n/home")),
            tmp: p("/h/.octl/sandboxes/R/n/tmp"),
            octl_home: (p("/h/.octl"), p("/h/.octl/s/0123456789abcdef")),
            read_only: vec![p("/h/.cargo/bin")],
            read_write: vec![],
            copies: vec![(p("/cfg/claude"), p("/h/.octl/sandboxes/R/n/copies/0"))],
            network: SandboxNetwork::None,
            relay: None,
        }
    }

    /// Each bind's destination, in order.
    fn mounted(argv: &[String]) -> Vec<String> {
        let mut out = Vec::new();
        let mut i = 0;
        while i < argv.len() {
            match argv[i].as_str() {
                "--bind" | "--ro-bind" | "--ro-bind-try" | "--bind-try" | "--symlink" => {
                    out.push(argv[i + 2].clone());
                    i += 3;
                }
                _ => i += 1,
            }
        }
        out
    }

    #[test]
    fn parents_are_mounted_before_what_is_inside_them() {
        let argv = argv(Path::new("/usr/bin/bwrap"), &view(), &[("/usr", None)]);
        let order = mounted(&argv);
        let at = |p: &str| {
            order
                .iter()
                .position(|o| o == p)
                .unwrap_or_else(|| panic!("{p} not mounted: {order:?}"))
        };
        assert!(at("/h") < at("/h/.octl"), "{order:?}");
        assert!(at("/h/.octl") < at("/h/.octl/worktrees/R/n"), "{order:?}");
        assert!(at("/h/src/app/.git") < at("/h/src/app/.git/objects"));
        assert!(at("/h/src/app/.git/objects") < at("/h/src/app/.git/objects/pack"));
        assert!(argv
            .join(" ")
            .contains("--ro-bind-try /h/src/app/.git/objects/pack /h/src/app/.git/objects/pack"));
        assert!(at("/h/src/app/.git") < at("/h/src/app/.git/refs/heads/octl/R"));
        assert!(at("/h") < at("/h/.cargo/bin"));
        // The worktree's links to its repository and branch, read-only over the writable
        // worktree and git directory.
        assert!(at("/h/.octl/worktrees/R/n") < at("/h/.octl/worktrees/R/n/.git"));
        for l in LINKS {
            let p = format!("/h/src/app/.git/worktrees/n/{l}");
            assert!(at("/h/src/app/.git/worktrees/n") < at(&p), "{order:?}");
            assert!(argv.join(" ").contains(&format!("--ro-bind {p} {p}")));
        }
        assert_eq!(argv.last().map(String::as_str), Some("--"));
        // No network: no --share-net; the working directory is the worktree.
        assert!(!argv.contains(&"--share-net".to_string()));
        let chdir = argv.iter().position(|a| a == "--chdir").unwrap();
        assert_eq!(argv[chdir + 1], "/h/.octl/worktrees/R/n");
    }

    #[test]
    fn the_home_and_the_daemons_home_are_private_copies() {
        let argv = argv(Path::new("bwrap"), &view(), &[]);
        let joined = argv.join(" ");
        assert!(
            joined.contains("--bind /h/.octl/sandboxes/R/n/home /h "),
            "{joined}"
        );
        assert!(
            joined.contains("--bind /h/.octl/s/0123456789abcdef /h/.octl "),
            "{joined}"
        );
        assert!(
            joined.contains("--ro-bind /h/src/app/.git /h/src/app/.git "),
            "{joined}"
        );
        assert!(
            joined
                .contains("--bind /h/.octl/sandboxes/R/n/refs /h/src/app/.git/refs/heads/octl/R "),
            "{joined}"
        );
        assert!(
            joined.contains("--bind /h/.octl/sandboxes/R/n/copies/0 /cfg/claude "),
            "{joined}"
        );
        let mut v = view();
        v.network = SandboxNetwork::Host;
        assert!(argv_has(
            &super::argv(Path::new("bwrap"), &v, &[]),
            "--share-net"
        ));
    }

    #[test]
    fn an_allow_list_starts_the_agent_behind_the_relay_in_a_network_of_its_own() {
        let mut v = view();
        v.network = SandboxNetwork::Allow;
        let forwards = vec![
            ("127.0.0.1:3128".to_string(), "127.0.0.1:3128".to_string()),
            ("127.0.0.1:8080".to_string(), "127.0.0.1:8080".to_string()),
        ];
        assert_eq!(http_port(&forwards), 3129);
        assert_eq!(http_port(&[]), 3128);
        v.relay = Some(Relay {
            program: PathBuf::from("/opt/octl/bin/octld"),
            dir: PathBuf::from("/h/.octl/sandboxes/R/n/net"),
            forwards: forwards[1..].to_vec(),
            http_port: 3128,
        });
        let argv = argv(Path::new("bwrap"), &v, &[]);
        assert!(!argv_has(&argv, "--share-net"), "{argv:?}");
        let joined = argv.join(" ");
        assert!(
            joined.contains("--ro-bind /h/.octl/sandboxes/R/n/net /run/octl-net "),
            "{joined}"
        );
        assert!(
            joined.contains("--setenv HTTPS_PROXY http://127.0.0.1:3128 "),
            "{joined}"
        );
        assert!(
            joined.contains("--setenv NO_PROXY localhost,127.0.0.1 "),
            "{joined}"
        );
        assert!(
            joined.ends_with(
                " -- /opt/octl/bin/octld sandbox-relay --proxy /run/octl-net/proxy.sock \
                 --listen 127.0.0.1:8080=127.0.0.1:8080 --http-proxy 127.0.0.1:3128 --"
            ),
            "{joined}"
        );
        // Exactly one `--` before the relay's: bwrap's.
        assert_eq!(argv.iter().filter(|a| *a == "--").count(), 2);
    }

    fn argv_has(argv: &[String], a: &str) -> bool {
        argv.iter().any(|x| x == a)
    }
}
