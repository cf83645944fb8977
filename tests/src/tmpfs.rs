//! A small real filesystem for disk-full tests: a tmpfs mounted (and resized, and unmounted)
//! by the test. Mounting needs root, so those tests are `#[ignore]`d with that reason and run
//! with `cargo test -p octl-tests -- --ignored` (as `.ci/run` does, as root); run without root
//! they fail, saying why, rather than pass without having run.

use std::path::{Path, PathBuf};
use std::process::Command;

pub struct Tmpfs {
    pub path: PathBuf,
}

impl Tmpfs {
    /// Mounts a tmpfs of `size` (e.g. "2m") with mode 0700 at `path`, created if missing.
    /// Panics when not root.
    pub fn mount(path: &Path, size: &str) -> Tmpfs {
        // SAFETY: geteuid has no preconditions.
        let root = unsafe { libc::geteuid() } == 0;
        assert!(
            root,
            "mounting a tmpfs needs root: run the disk-full tests as root, as CI does"
        );
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
        Tmpfs {
            path: path.to_path_buf(),
        }
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
