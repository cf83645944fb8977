//! The `orchestratectl` binary: everything lives in the library (`octl_client::main`).

fn main() {
    // Die quietly on a closed pipe (`orchestratectl event list … | head`), as Unix tools do.
    // SAFETY: restoring the default disposition of SIGPIPE before any thread is started.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
    let args: Vec<_> = std::env::args_os().collect();
    // Claude Code's hooks wait for this: answered before clap or a runtime exist.
    if octl_client::hook::is_hook(&args) {
        std::process::exit(octl_client::hook::main(&args));
    }
    std::process::exit(octl_client::main(args));
}
