//! The web UI's files, embedded at build time from `octld/ui/` (see `octld/build.rs`).

/// Each file's name, bytes and content type.
static FILES: &[(&str, &[u8], &str)] = include!(concat!(env!("OUT_DIR"), "/assets.rs"));

/// A file by name, and its content type.
pub fn get(name: &str) -> Option<(&'static [u8], &'static str)> {
    FILES
        .iter()
        .find(|(n, _, _)| *n == name)
        .map(|(_, b, m)| (*b, *m))
}
