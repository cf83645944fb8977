//! `ui [--no-open] [--stop]`: the web UI. Asks the daemon to serve it (`ui.open`), prints its
//! address and a one-time login link, and opens a browser where there is one; `--stop` stops
//! serving it and logs every browser out (`ui.close`).

use clap::Args;
use octl_proto::method::{self, NoParams};
use octl_proto::rpc::{UiClosed, UiOpened};
use octl_proto::AppError;

use super::{call, result_of, Ctx};

pub const UI_EXAMPLES: &str = "\
Examples:
  orchestratectl ui                 # serve it, print the link, open a browser
  orchestratectl ui --no-open       # print the link only (over SSH: see below)
  orchestratectl --json ui --no-open   # {listen, url, login_url, expires_in_s, tls}
  orchestratectl ui --stop          # stop serving it; every browser is logged out

From a phone or another machine, through an SSH tunnel (the UI stays on loopback):
  ssh -L 7420:127.0.0.1:7420 you@this-machine    # then open the printed link there";

#[derive(Debug, Args)]
pub struct UiArgs {
    /// Print the link without opening a browser
    #[arg(long)]
    pub no_open: bool,

    /// Stop serving the UI and log every browser session out
    #[arg(long, conflicts_with = "no_open")]
    pub stop: bool,
}

pub async fn execute(ctx: &Ctx, args: UiArgs) -> Result<(), AppError> {
    if args.stop {
        let value = call::<method::UiClose>(ctx, &NoParams {}).await?;
        let r: UiClosed = result_of::<method::UiClose>(&value)?;
        ctx.out.result(&value, || match r.was_serving {
            true => format!(
                "Stopped serving the UI; {} session(s) logged out",
                r.sessions
            ),
            false => "The UI was not being served".into(),
        });
        return Ok(());
    }
    let value = call::<method::UiOpen>(ctx, &NoParams {}).await?;
    let r: UiOpened = result_of::<method::UiOpen>(&value)?;
    ctx.out.result(&value, || text(&r));
    if !args.no_open {
        open_browser(&r.login_url);
    }
    Ok(())
}

fn text(r: &UiOpened) -> String {
    let mut s = format!(
        "Serving the UI at {}\nLog in (once, within {} minutes): {}",
        r.url,
        r.expires_in_s / 60,
        r.login_url
    );
    if let Some(f) = &r.fingerprint {
        s.push_str(&format!("\nCertificate SHA-256: {f}"));
    }
    s
}

/// Opens `url` in the desktop's browser, if this machine has one; quietly nothing otherwise
/// (the link is printed).
fn open_browser(url: &str) {
    let opener = if cfg!(target_os = "macos") {
        "open"
    } else {
        "xdg-open"
    };
    let has_display = cfg!(target_os = "macos")
        || std::env::var_os("DISPLAY").is_some()
        || std::env::var_os("WAYLAND_DISPLAY").is_some();
    if has_display {
        let _ = std::process::Command::new(opener)
            .arg(url)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn();
    }
}
