# shellcheck shell=bash
# Part of tests/e2e/cluster.sh (sourced there, not run): building etcd, the
# Kubernetes binaries (kube-apiserver, kube-scheduler,
# kube-controller-manager, kubectl, kubelet), kwok, helm, containerd and the
# real node's stand-in programs from the Go module proxy into the cache, one
# build lock per target. Uses cluster.sh's paths, versions, log and die.

# go_build OUT MODULE_DIR LDFLAGS PACKAGE...: build the PACKAGEs inside
# MODULE_DIR in one `go build`. With one package OUT is the binary; with
# several it is a directory that receives one binary per package (named
# after the package's last element), so the packages share one compile and
# link step and the directory appears whole or not at all.
go_build() {
    local out="$1" moddir="$2" ldflags="-s -w $3"; shift 3
    local tmp="$out.tmp.$$" dest
    local t0=$SECONDS
    if (( $# > 1 )); then
        mkdir -p "$tmp"
        dest="$tmp/"
    else
        dest="$tmp"
    fi
    log "building $(basename "$out") ($*) ..."
    # -mod=readonly: go.mod/go.sum are complete and committed; never rewrite them.
    # nice: builds share the machine with other compilers.
    if ! (cd "$moddir" && GOFLAGS="${GOFLAGS:-} -mod=readonly" CGO_ENABLED=0 \
            nice -n 10 go build -trimpath -ldflags "$ldflags" -o "$dest" "$@"); then
        rm -rf "$tmp"
        die "go build of $* failed"
    fi
    rm -rf "$out"
    mv -f "$tmp" "$out"
    log "built $(basename "$out") in $((SECONDS - t0))s"
}

need_go() {
    command -v go >/dev/null 2>&1 || die "go is not installed (needs Go >= 1.26)"
}

# with_build_lock NAME FUNCTION: run FUNCTION holding the cache's lock NAME, so
# concurrent test processes never build the same binary twice at once (one lock
# per target: a helm build does not wait for a kube-apiserver build).
with_build_lock() {
    local name="$1"; shift
    mkdir -p "$BIN_DIR"
    exec 9>"$BIN_DIR/.build-$name.lock"
    if command -v flock >/dev/null 2>&1; then flock 9; fi
    "$@"
    exec 9>&-
}

# The Kubernetes binaries `start` runs, all present.
kube_bins_present() {
    local b
    for b in "$KUBE_APISERVER_BIN" "$KUBE_SCHEDULER_BIN" "$KUBE_CONTROLLER_MANAGER_BIN" "$KUBECTL_BIN" \
        "$KUBELET_BIN"; do
        [[ -x "$b" ]] || return 1
    done
}

# etcd, and the five Kubernetes binaries in one `go build`: they share most
# of their packages, so the scheduler, controller-manager, kubectl and the
# kubelet cost little beyond the apiserver's compile. A cache from before the
# kubelet was added is rebuilt whole (a re-link, with the build cache warm),
# so the five always come from one build with one stamp.
build_control_plane_locked() {
    local t0=$SECONDS built=0
    if [[ ! -x "$ETCD_BIN" ]]; then
        go_build "$ETCD_BIN" "$MOD_DIR/etcd" \
            "-X go.etcd.io/etcd/api/v3/version.GitSHA=$ETCD_VERSION" .
        built=1
    fi
    if ! kube_bins_present; then
        local ldf="" key val
        # Same version stamping as kubernetes' hack/lib/version.sh, so /version
        # reports the real release (helm and clients look at it).
        for key in gitVersion=$KUBE_VERSION gitMajor=$KUBE_MAJOR gitMinor=$KUBE_MINOR \
                   gitTreeState=clean buildDate=1970-01-01T00:00:00Z; do
            val="${key#*=}"; key="${key%%=*}"
            ldf+=" -X k8s.io/component-base/version.$key=$val -X k8s.io/client-go/pkg/version.$key=$val"
        done
        go_build "$KUBE_BIN_DIR" "$MOD_DIR" "$ldf" \
            k8s.io/kubernetes/cmd/kube-apiserver \
            k8s.io/kubernetes/cmd/kube-scheduler \
            k8s.io/kubernetes/cmd/kube-controller-manager \
            k8s.io/kubernetes/cmd/kubectl \
            k8s.io/kubernetes/cmd/kubelet
        built=1
    fi
    if (( built )); then
        log "control plane build took $((SECONDS - t0))s"
    fi
}

build_control_plane() {
    if [[ -x "$ETCD_BIN" ]] && kube_bins_present; then return 0; fi
    need_go
    with_build_lock control-plane build_control_plane_locked
}

# kwok: its own module, since it pulls k8s.io/* v0.36.x (its version is a
# constant in its source, so nothing to stamp).
build_kwok_locked() {
    [[ -x "$KWOK_BIN" ]] && return 0
    go_build "$KWOK_BIN" "$MOD_DIR/kwok" "" sigs.k8s.io/kwok/cmd/kwok
}

build_kwok() {
    if [[ -x "$KWOK_BIN" ]]; then return 0; fi
    need_go
    with_build_lock kwok build_kwok_locked
}

# helm only. Stamped like helm's own Makefile: version, and the Kubernetes
# version helm assumes when it talks to no cluster (`helm template`, `helm
# lint`, `helm install --dry-run=client`: .Capabilities.KubeVersion and the
# check of a chart's kubeVersion). Unstamped, a `go build` of helm assumes
# v1.20.0, which fails every chart that needs a newer Kubernetes unless
# `--kube-version` is given. The Makefile derives it from helm's client-go
# (v0.36 -> 1.36); here it is the control plane's version, so offline
# rendering and the e2e apiserver agree.
build_helm_locked() {
    [[ -x "$HELM_BIN" ]] && return 0
    local p="helm.sh/helm/v3"
    go_build "$HELM_BIN" "$MOD_DIR/helm" \
        "-X $p/internal/version.version=$HELM_VERSION \
         -X $p/internal/version.gitTreeState=clean \
         -X $p/pkg/chartutil.k8sVersionMajor=$KUBE_MAJOR \
         -X $p/pkg/chartutil.k8sVersionMinor=$KUBE_MINOR \
         -X $p/pkg/lint/rules.k8sVersionMajor=$KUBE_MAJOR \
         -X $p/pkg/lint/rules.k8sVersionMinor=$KUBE_MINOR" \
        "$p/cmd/helm"
    # The stamping must have taken (a renamed variable in a new helm would
    # silently leave v1.20.0).
    local kv chk
    chk="$(mktemp -d)"
    mkdir -p "$chk/t/templates"
    printf 'apiVersion: v2\nname: t\nversion: 0.0.1\n' >"$chk/t/Chart.yaml"
    printf 'kube: {{ .Capabilities.KubeVersion.Version }}\n' >"$chk/t/templates/v.yaml"
    kv="$("$HELM_BIN" template "$chk/t" 2>&1 | sed -n 's/^kube: //p')" || true
    rm -rf "$chk"
    if [[ "$kv" != "v$KUBE_MAJOR.$KUBE_MINOR.0" ]]; then
        rm -f "$HELM_BIN"
        die "helm built, but it assumes Kubernetes '$kv', not v$KUBE_MAJOR.$KUBE_MINOR.0: check the -X variable names in helm $HELM_VERSION"
    fi
    log "helm assumes Kubernetes $kv offline"
}

build_helm() {
    if [[ -x "$HELM_BIN" ]]; then return 0; fi
    need_go
    with_build_lock helm build_helm_locked
}

# containerd, its runc shim and ctr: the real node's runtime (one `go build`,
# stamped like containerd's Makefile). The build tags leave out the
# snapshotters the node does not use (it runs overlayfs) and tracing.
build_containerd_locked() {
    containerd_present && return 0
    GOFLAGS="${GOFLAGS:-} -tags=no_btrfs,no_devmapper,no_zfs,no_tracing" \
        go_build "$CONTAINERD_BIN_DIR" "$MOD_DIR/containerd" \
        "-X github.com/containerd/containerd/v2/version.Version=$CONTAINERD_VERSION" \
        github.com/containerd/containerd/v2/cmd/containerd \
        github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2 \
        github.com/containerd/containerd/v2/cmd/ctr
}

containerd_present() {
    local b
    for b in containerd containerd-shim-runc-v2 ctr; do [[ -x "$CONTAINERD_BIN_DIR/$b" ]] || return 1; done
}

build_containerd() {
    containerd_present && return 0
    need_go
    with_build_lock containerd build_containerd_locked
}

# agent-sandbox's controller (Sandbox, and with --extensions SandboxTemplate,
# SandboxClaim and SandboxWarmPool): its own module, stamped like its
# Dockerfile; its CRDs, copied as they ship from the same module version's
# k8s/crds/ (the Go module cache) into the binary cache beside it, so a
# start needs no Go (cluster-agent-sandbox.sh applies them).
agent_sandbox_present() {
    [[ -x "$AGENT_SANDBOX_BIN" && -f "$AGENT_SANDBOX_CRDS_DIR/agents.x-k8s.io_sandboxes.yaml" ]]
}

build_agent_sandbox_locked() {
    agent_sandbox_present && return 0
    local p="sigs.k8s.io/agent-sandbox/internal/version"
    if [[ ! -x "$AGENT_SANDBOX_BIN" ]]; then
        go_build "$AGENT_SANDBOX_BIN" "$MOD_DIR/agent-sandbox" \
            "-X $p.gitVersion=$AGENT_SANDBOX_VERSION -X $p.gitSHA=$AGENT_SANDBOX_VERSION -X $p.buildDate=1970-01-01T00:00:00Z" \
            sigs.k8s.io/agent-sandbox/cmd/agent-sandbox-controller
    fi
    local dir tmp="$AGENT_SANDBOX_CRDS_DIR.tmp.$$"
    dir="$(cd "$MOD_DIR/agent-sandbox" && GOFLAGS=-mod=readonly go list -m -f '{{.Dir}}' sigs.k8s.io/agent-sandbox)" ||
        die "cannot find sigs.k8s.io/agent-sandbox in the Go module cache"
    [[ -d "$dir/k8s/crds" ]] || die "agent-sandbox $AGENT_SANDBOX_VERSION has no k8s/crds in $dir"
    rm -rf "$tmp" && mkdir -p "$tmp"
    cp "$dir"/k8s/crds/*.yaml "$tmp/"
    chmod u+w "$tmp"/*.yaml
    rm -rf "$AGENT_SANDBOX_CRDS_DIR"
    mv "$tmp" "$AGENT_SANDBOX_CRDS_DIR"
}

build_agent_sandbox() {
    agent_sandbox_present && return 0
    need_go
    with_build_lock agent-sandbox build_agent_sandbox_locked
}

# The stand-in programs of the real node's images (tests/image/node: pause,
# execd, egress, and peek, the attacks a hostile sandbox tries; the Go
# standard library only), cached under the hash of their sources, so an
# edit rebuilds them.
standins_dir() {
    local hash
    hash="$(cd "$STANDIN_SRC" && find . -name '*.go' -o -name go.mod | LC_ALL=C sort | xargs cat | sha256sum | cut -c1-12)"
    printf '%s\n' "$BIN_DIR/standins-$hash"
}

build_standins_locked() {
    local out
    out="$(standins_dir)"
    [[ -x "$out/peek" ]] && return 0
    go_build "$out" "$STANDIN_SRC" "" ./pause ./execd ./egress ./peek
}

build_standins() {
    [[ -x "$(standins_dir)/peek" ]] && return 0
    need_go
    with_build_lock standins build_standins_locked
}

cmd_build() {
    local t0=$SECONDS
    build_control_plane
    build_kwok
    build_helm
    build_node
    build_agent_sandbox
    log "build: all binaries in $BIN_DIR ($((SECONDS - t0))s)"
    printf 'KUBE_APISERVER=%s\nKUBE_SCHEDULER=%s\nKUBE_CONTROLLER_MANAGER=%s\nKUBECTL=%s\nKUBELET=%s\nETCD=%s\nKWOK=%s\nHELM=%s\nCONTAINERD=%s\nAGENT_SANDBOX_CONTROLLER=%s\n' \
        "$KUBE_APISERVER_BIN" "$KUBE_SCHEDULER_BIN" "$KUBE_CONTROLLER_MANAGER_BIN" "$KUBECTL_BIN" \
        "$KUBELET_BIN" "$ETCD_BIN" "$KWOK_BIN" "$HELM_BIN" "$CONTAINERD_BIN_DIR/containerd" "$AGENT_SANDBOX_BIN"
}

cmd_helm() {
    build_helm
    printf '%s\n' "$HELM_BIN"
}
