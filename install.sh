#!/usr/bin/env sh
# Installs both binaries, octld and orchestratectl, into cargo's bin directory
# (or --root DIR). Extra arguments go to `cargo install`.
set -eu
cd "$(dirname "$0")"
cargo install --locked --path octld "$@"
cargo install --locked --path octl-client "$@"
