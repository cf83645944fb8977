//! The `orchestratectl` binary: everything lives in the library (`octl_client::main`).

fn main() {
    // Die quietly on a closed pipe (`orchestratectl event list … | head`), as Unix tools do.
    // SAFETY: restoring the default disposition of SIGPIPE before any thread is started.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
    std::process::exit(octl_client::main(std::env::args_os().collect()));
}
