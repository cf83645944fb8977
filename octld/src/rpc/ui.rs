//! `ui.open`, `ui.close`: the web UI served or not ([`crate::ui`]).

use std::sync::Arc;

use octl_proto::method;
use octl_proto::AppError;

use super::Handle;
use crate::daemon::Daemon;

impl Handle for method::UiOpen {
    async fn handle(daemon: &Arc<Daemon>, _: Self::Params) -> Result<Self::Result, AppError> {
        crate::ui::open(daemon).await
    }
}

impl Handle for method::UiClose {
    async fn handle(daemon: &Arc<Daemon>, _: Self::Params) -> Result<Self::Result, AppError> {
        Ok(crate::ui::close(daemon))
    }
}
