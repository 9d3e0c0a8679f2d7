# shellcheck shell=bash
# Part of tests/e2e/cluster.sh (sourced there, not run): the real node's
# images, which no registry serves here. Built with podman from `scratch`
# (tests/image/node/*.Containerfile), saved as OCI archives and imported
# into the node's containerd:
#   pause    the CRI's sandbox image (registry.k8s.io/pause's job);
#   busybox  Debian's busybox-static: the sandboxes' own image in tests,
#            with /bin/peek (the attacks a hostile sandbox tries);
#   execd    stand-in for opensandbox/execd: /execd, /bootstrap.sh, bwrap
#            and the session gate, and busybox for the installer's shell;
#   egress   stand-in for opensandbox/egress.
# The archives are cached under a hash of everything that goes into them.
# Uses cluster.sh's paths, log, die and with_build_lock.

NODE_IMAGE_PREFIX="localhost/sandbox-webhook-e2e"
NODE_IMAGES=(pause busybox execd egress)

# node_image NAME: the reference of a stand-in image.
node_image() {
    printf '%s/%s:1\n' "$NODE_IMAGE_PREFIX" "$1"
}

# busybox_static: the path of Debian's static busybox, downloaded (not
# installed: it conflicts with the dynamic busybox package) and extracted
# into the cache once per version.
busybox_static() {
    local version dir
    version="$(apt-cache policy busybox-static 2>/dev/null | awk '$1 == "Candidate:" { print $2 }')"
    if [[ -z "$version" || "$version" == "(none)" ]]; then
        apt-get update -qq >&2 || die "apt-get update failed (busybox-static is needed for the node's images)"
        version="$(apt-cache policy busybox-static | awk '$1 == "Candidate:" { print $2 }')"
    fi
    [[ -n "$version" && "$version" != "(none)" ]] || die "Debian has no busybox-static package here"
    dir="$CACHE_DIR/debs/busybox-static-${version//[:~+]/_}"
    if [[ ! -x "$dir/bin/busybox" ]]; then
        local tmp="$dir.tmp.$$"
        rm -rf "$tmp" && mkdir -p "$tmp"
        (cd "$tmp" && apt-get -o APT::Sandbox::User=root download "busybox-static=$version" >&2) ||
            { rm -rf "$tmp"; die "apt-get download busybox-static=$version failed"; }
        dpkg-deb -x "$tmp"/busybox-static_*.deb "$tmp/root"
        mkdir -p "$tmp/bin"
        cp "$tmp/root/bin/busybox" "$tmp/bin/busybox"
        rm -rf "$tmp/root" "$tmp"/*.deb "$dir"
        mv "$tmp" "$dir"
    fi
    printf '%s\n' "$dir/bin/busybox"
}

# node_images_dir: the cache directory of the archives for the current
# stand-ins, busybox and Containerfiles.
node_images_dir() {
    local hash
    hash="$( {
        basename "$(standins_dir)"
        sha256sum "$(busybox_static)" | cut -c1-64
        cd "$STANDIN_SRC" && cat ./*.Containerfile ./rootfs/*
    } | sha256sum | cut -c1-12)"
    printf '%s\n' "$CACHE_DIR/images/node-$hash"
}

# busybox_rootfs BUSYBOX DIR: DIR/bin with busybox and a symlink per applet
# (made here: a RUN step would need a container, and podman's runc cannot
# set the rlimits of one on a machine without CAP_SYS_RESOURCE).
busybox_rootfs() {
    mkdir -p "$2/bin"
    cp "$1" "$2/bin/busybox"
    local applet
    for applet in $("$1" --list); do
        [[ "$applet" == busybox ]] || ln -s busybox "$2/bin/$applet"
    done
}

build_node_images_locked() {
    local out
    out="$(node_images_dir)"
    [[ -f "$out/done" ]] && return 0
    command -v podman >/dev/null 2>&1 || die "podman is needed to build the node's images"
    local t0=$SECONDS tmp bins name
    tmp="$(mktemp -d "$CACHE_DIR/images.tmp.XXXXXX")"
    bins="$(standins_dir)"
    # A private store with the vfs driver: no mounts to leave behind, and no
    # tag of another run's podman (tests/image/run.sh) is ever touched.
    local podman=(podman --root "$tmp/storage" --runroot "$tmp/run" --storage-driver vfs
                  --cgroup-manager cgroupfs --events-backend none)
    mkdir -p "$tmp/ctx" "$tmp/out"
    busybox_rootfs "$(busybox_static)" "$tmp/ctx"
    cp "$bins/pause" "$bins/execd" "$bins/egress" "$bins/peek" "$tmp/ctx/"
    cp -r "$STANDIN_SRC/rootfs" "$tmp/ctx/rootfs"
    for name in "${NODE_IMAGES[@]}"; do
        "${podman[@]}" build --quiet --pull=never --network=none \
            -f "$STANDIN_SRC/$name.Containerfile" -t "$(node_image "$name")" "$tmp/ctx" >/dev/null ||
            { rm -rf "$tmp"; die "podman build of the $name image failed"; }
        "${podman[@]}" save --quiet --format oci-archive -o "$tmp/out/$name.tar" "$(node_image "$name")" ||
            { rm -rf "$tmp"; die "podman save of the $name image failed"; }
    done
    : >"$tmp/out/done"
    rm -rf "$out"
    mkdir -p "$(dirname "$out")"
    mv "$tmp/out" "$out"
    rm -rf "$tmp"
    log "built the node's images (${NODE_IMAGES[*]}) in $((SECONDS - t0))s: $out"
}

build_node_images() {
    [[ -f "$(node_images_dir)/done" ]] && return 0
    with_build_lock node-images build_node_images_locked
}

# node_import DIR ARCHIVE...: imports OCI archives into DIR's node, where
# the kubelet finds them by name (imagePullPolicy IfNotPresent or Never).
node_import() {
    local d="$1" tar err; shift
    err="$(mktemp)"
    for tar in "$@"; do
        # ctr warns about cgroup v1 on every call; shown only on failure.
        node_ctr "$d" images import --snapshotter overlayfs "$tar" >/dev/null 2>"$err" ||
            { cat "$err" >&2; rm -f "$err"; die "ctr images import $tar failed"; }
    done
    rm -f "$err"
}
