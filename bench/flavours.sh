#!/usr/bin/env bash
# The release binary built three ways from the same source ("flavours"),
# and which one the image ships. bench/run.sh measures them side by side
# (docs/performance.md, "Flavours"); tests/image/run.sh puts the shipped
# one into the image, and the Dockerfile's builder stage uses the same flags.
#
#   bench/flavours.sh path [FLAVOUR]   build FLAVOUR (default: the shipped one)
#                                      with cargo (incremental) and print the
#                                      binary's path; build output on stderr
#   bench/flavours.sh shipped          print the shipped flavour's name
#
# Flavours (FLAVOURS below):
#   glibc-static   `-C target-feature=+crt-static` for the host's gnu triple:
#                  glibc's allocator, no shared libraries. The image ships it.
#   glibc-dynamic  plain `cargo build --release` (libc.so, libgcc_s.so): the
#                  binary every figure before issue 25 measured.
#   musl           static musl with musl's own allocator: what the image
#                  shipped before issue 25 (about 3x the CPU per review).
#
# glibc-static is built with --target, so that crt-static reaches only the
# binary, not the build scripts and proc macros (which must stay dynamic);
# it lives in $CARGO_TARGET_DIR/<triple>/release. Run from the repository
# root (cargo resolves a relative CARGO_TARGET_DIR against it); environment:
# CARGO_TARGET_DIR (default target).
set -euo pipefail

FLAVOURS=(glibc-static glibc-dynamic musl)
SHIPPED_FLAVOUR=glibc-static

# flavour_triple FLAVOUR: the Rust target triple it is built for.
flavour_triple() {
    local arch
    arch="$(uname -m)"
    case "$1" in
        glibc-static | glibc-dynamic) echo "$arch-unknown-linux-gnu" ;;
        musl) echo "$arch-unknown-linux-musl" ;;
        *) echo "unknown flavour '$1' (one of: ${FLAVOURS[*]})" >&2; return 2 ;;
    esac
}

# flavour_path FLAVOUR: builds it (stdout/stderr of cargo go to stderr) and
# prints the binary's path; fails if a static flavour came out dynamic (a
# RUSTFLAGS or CARGO_ENCODED_RUSTFLAGS of the caller's can override ours).
flavour_path() {
    local flavour="$1" triple target bin
    triple="$(flavour_triple "$flavour")"
    local cargo=(cargo build --release --locked --bin sandbox-webhook)
    case "$flavour" in
        glibc-dynamic)
            "${cargo[@]}" >&2
            bin="release/sandbox-webhook"
            ;;
        glibc-static)
            RUSTFLAGS="${RUSTFLAGS:-} -C target-feature=+crt-static" "${cargo[@]}" --target "$triple" >&2
            bin="$triple/release/sandbox-webhook"
            ;;
        musl)
            flavour_musl_tools "$triple"
            env "CC_${triple//-/_}=musl-gcc" "${cargo[@]}" --target "$triple" >&2
            bin="$triple/release/sandbox-webhook"
            ;;
    esac
    # cargo resolves a relative CARGO_TARGET_DIR against the working directory.
    target="$(cd "${CARGO_TARGET_DIR:-target}" && pwd)"
    bin="$target/$bin"
    if [[ $flavour != glibc-dynamic ]] && readelf -lW "$bin" | grep -q 'program interpreter'; then
        echo "flavours.sh: $bin ($flavour) is dynamically linked; is RUSTFLAGS overriding crt-static?" >&2
        return 1
    fi
    echo "$bin"
}

# The musl flavour needs the Rust target and musl-gcc (ring's C parts).
flavour_musl_tools() {
    rustup target list --installed 2>/dev/null | grep -qx "$1" || rustup target add "$1" >&2
    command -v musl-gcc >/dev/null && return 0
    local sudo=""
    [[ $(id -u) == 0 ]] || sudo=sudo
    $sudo apt-get install -y -qq musl-tools >&2 ||
        { $sudo apt-get update -qq >&2 && $sudo apt-get install -y -qq musl-tools >&2; }
}

if [[ ${BASH_SOURCE[0]} == "$0" ]]; then
    cd "$(dirname "$0")/.."
    case "${1:-}" in
        path) flavour_path "${2:-$SHIPPED_FLAVOUR}" ;;
        shipped) echo "$SHIPPED_FLAVOUR" ;;
        *) sed -n '2,/^set -euo/p' "$0" | sed -e '$d' -e 's/^# \{0,1\}//' >&2; exit 2 ;;
    esac
fi
