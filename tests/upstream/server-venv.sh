#!/usr/bin/env bash
# Builds (or reuses) the virtualenv that holds OpenSandbox's released server,
# opensandbox-server from PyPI, pinned with its whole dependency set in
# requirements.txt beside this script. Prints the venv's python on stdout;
# logs go to stderr. Cached like the Go-built binaries:
#   ${SANDBOX_WEBHOOK_CACHE:-~/.cache/sandbox-webhook}/venv/opensandbox-server-<version>-<hash>
# A new upstream release is one pin bump in requirements.txt (pip freeze of a
# fresh `pip install opensandbox-server==X`), which names a new venv.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
req="$here/requirements.txt"
version="$(sed -n 's/^opensandbox-server==//p' "$req")"
[[ -n "$version" ]] || { echo "server-venv.sh: $req pins no opensandbox-server" >&2; exit 1; }
hash="$(sha256sum "$req" | cut -c1-12)"
cache="${SANDBOX_WEBHOOK_CACHE:-$HOME/.cache/sandbox-webhook}"
venv="$cache/venv/opensandbox-server-$version-$hash"
python="$venv/bin/python"

if [[ ! -x "$python" || ! -f "$venv/.complete" ]]; then
    mkdir -p "$cache/venv"
    exec 9>"$cache/venv/.build.lock"
    flock 9
    if [[ ! -f "$venv/.complete" ]]; then
        command -v python3 >/dev/null || { echo "server-venv.sh: python3 is required" >&2; exit 1; }
        echo "server-venv.sh: installing opensandbox-server $version into $venv" >&2
        rm -rf "$venv"
        t0=$SECONDS
        # python3-venv may be missing on a bare Debian; install it the way test.sh installs tools.
        if ! python3 -m venv "$venv" >&2 2>&1; then
            rm -rf "$venv"
            DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends python3-venv >&2 ||
                { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends python3-venv >&2; }
            python3 -m venv "$venv" >&2
        fi
        "$python" -m pip install --quiet --disable-pip-version-check --no-deps -r "$req" >&2
        # --no-deps installs exactly the pins; check then says whether they are complete.
        "$python" -m pip check >&2
        touch "$venv/.complete"
        echo "server-venv.sh: installed in $((SECONDS - t0))s" >&2
    fi
    exec 9>&-
fi
"$python" -c 'import opensandbox_server.services.k8s.kubernetes_service' ||
    { echo "server-venv.sh: $venv cannot import opensandbox_server; remove it and run again" >&2; exit 1; }
echo "$python"
