# shellcheck shell=bash
# Part of tests/e2e/cluster.sh (sourced there, not run): building etcd,
# kube-apiserver and helm from the Go module proxy into the cache, one build
# lock per target. Uses cluster.sh's paths, versions, log and die.

# go_build OUT MODULE_DIR PACKAGE LDFLAGS...: build PACKAGE inside MODULE_DIR into OUT.
go_build() {
    local out="$1" moddir="$2" pkg="$3"; shift 3
    local ldflags="-s -w $*"
    local tmp="$out.tmp.$$"
    local t0=$SECONDS
    log "building $(basename "$out") ($pkg) ..."
    # -mod=readonly: go.mod/go.sum are complete and committed; never rewrite them.
    # nice: builds share the machine with other compilers.
    if ! (cd "$moddir" && GOFLAGS="${GOFLAGS:-} -mod=readonly" CGO_ENABLED=0 \
            nice -n 10 go build -trimpath -ldflags "$ldflags" -o "$tmp" "$pkg"); then
        rm -f "$tmp"
        die "go build of $pkg failed"
    fi
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

# etcd and kube-apiserver: what `start` needs.
build_control_plane_locked() {
    local t0=$SECONDS built=0
    if [[ ! -x "$ETCD_BIN" ]]; then
        go_build "$ETCD_BIN" "$MOD_DIR/etcd" . \
            "-X go.etcd.io/etcd/api/v3/version.GitSHA=$ETCD_VERSION"
        built=1
    fi
    if [[ ! -x "$KUBE_APISERVER_BIN" ]]; then
        local ldf=() key val
        # Same version stamping as kubernetes' hack/lib/version.sh, so /version
        # reports the real release (helm and clients look at it).
        for key in gitVersion=$KUBE_VERSION gitMajor=$KUBE_MAJOR gitMinor=$KUBE_MINOR \
                   gitTreeState=clean buildDate=1970-01-01T00:00:00Z; do
            val="${key#*=}"; key="${key%%=*}"
            ldf+=("-X k8s.io/component-base/version.$key=$val" "-X k8s.io/client-go/pkg/version.$key=$val")
        done
        go_build "$KUBE_APISERVER_BIN" "$MOD_DIR" k8s.io/kubernetes/cmd/kube-apiserver "${ldf[@]}"
        built=1
    fi
    if (( built )); then
        log "etcd/kube-apiserver build took $((SECONDS - t0))s"
    fi
}

build_control_plane() {
    if [[ -x "$ETCD_BIN" && -x "$KUBE_APISERVER_BIN" ]]; then return 0; fi
    need_go
    with_build_lock control-plane build_control_plane_locked
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
    go_build "$HELM_BIN" "$MOD_DIR/helm" "$p/cmd/helm" \
        "-X $p/internal/version.version=$HELM_VERSION" \
        "-X $p/internal/version.gitTreeState=clean" \
        "-X $p/pkg/chartutil.k8sVersionMajor=$KUBE_MAJOR" \
        "-X $p/pkg/chartutil.k8sVersionMinor=$KUBE_MINOR" \
        "-X $p/pkg/lint/rules.k8sVersionMajor=$KUBE_MAJOR" \
        "-X $p/pkg/lint/rules.k8sVersionMinor=$KUBE_MINOR"
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

cmd_build() {
    local t0=$SECONDS
    build_control_plane
    build_helm
    log "build: all binaries in $BIN_DIR ($((SECONDS - t0))s)"
    printf 'KUBE_APISERVER=%s\nETCD=%s\nHELM=%s\n' "$KUBE_APISERVER_BIN" "$ETCD_BIN" "$HELM_BIN"
}

cmd_helm() {
    build_helm
    printf '%s\n' "$HELM_BIN"
}

