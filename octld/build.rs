//! Embeds the web UI's files (`ui/`): a table of each file's name, bytes and type, so
//! `cargo build` and `cargo install` need nothing but the sources (no Node, no bundler).

use std::fmt::Write;

fn main() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("ui");
    println!("cargo::rerun-if-changed={}", dir.display());
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .expect("octld/ui/ holds the web UI")
        .map(|e| {
            e.expect("a readable entry")
                .file_name()
                .into_string()
                .expect("UTF-8 names")
        })
        .filter(|n| !n.starts_with('.'))
        .collect();
    names.sort();
    let mut table = String::from("&[\n");
    for name in names {
        let mime = match name.rsplit_once('.').map(|(_, ext)| ext) {
            Some("html") => "text/html; charset=utf-8",
            Some("js") => "text/javascript; charset=utf-8",
            Some("css") => "text/css; charset=utf-8",
            Some("svg") => "image/svg+xml",
            Some("png") => "image/png",
            Some("json") | Some("webmanifest") => "application/manifest+json",
            _ => panic!("octld/ui/{name}: say its content type in octld/build.rs"),
        };
        let path = dir.join(&name);
        writeln!(
            table,
            "    ({name:?}, include_bytes!({:?}), {mime:?}),",
            path.display().to_string()
        )
        .unwrap();
    }
    table.push(']');
    let out = std::path::Path::new(&std::env::var("OUT_DIR").unwrap()).join("assets.rs");
    std::fs::write(out, table).unwrap();
}
