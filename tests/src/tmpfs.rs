//! A small real filesystem for disk-full tests: a tmpfs mounted (and resized, and unmounted)
//! by the test. Mounting needs root, as in CI; elsewhere the test skips, saying why — never
//! under `CI=true`, where a test that cannot mount fails.

use std::path::{Path, PathBuf};
use std::process::Command;

pub struct Tmpfs {
    pub path: PathBuf,
}

impl Tmpfs {
    /// Mounts a tmpfs of `size` (e.g. "2m") with mode 0700 at `path`, created if missing.
    /// `None` (after printing why) only when not root and not in CI.
    pub fn mount(path: &Path, size: &str) -> Option<Tmpfs> {
        // SAFETY: geteuid has no preconditions.
        let root = unsafe { libc::geteuid() } == 0;
        let ci = std::env::var("CI").is_ok_and(|v| v == "true");
        if !root {
            assert!(
                !ci,
                "CI=true but the tests do not run as root: mounting a tmpfs needs root"
            );
            eprintln!("SKIPPED: mounting a tmpfs needs root (run the tests as root, as CI does)");
            return None;
        }
        std::fs::create_dir_all(path).expect("mount point");
        let out = Command::new("mount")
            .args([
                "-t",
                "tmpfs",
                "-o",
                &format!("size={size},mode=0700"),
                "tmpfs",
            ])
            .arg(path)
            .output()
            .expect("run mount");
        assert!(
            out.status.success(),
            "mount -t tmpfs at {} failed: {}",
            path.display(),
            String::from_utf8_lossy(&out.stderr)
        );
        Some(Tmpfs {
            path: path.to_path_buf(),
        })
    }

    /// Grows (or shrinks) the filesystem in place: what is on it stays.
    pub fn resize(&self, size: &str) {
        let out = Command::new("mount")
            .args(["-o", &format!("remount,size={size}")])
            .arg(&self.path)
            .output()
            .expect("run mount");
        assert!(
            out.status.success(),
            "remount of {} failed: {}",
            self.path.display(),
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        // Lazy: a process the test started may still hold a file open on it.
        let _ = Command::new("umount").arg("-l").arg(&self.path).status();
    }
}
