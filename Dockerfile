# syntax=docker/dockerfile:1.7
#
# sandbox-webhook image: one static binary (glibc, statically linked) on
# `scratch`, non-root. Release (multi-arch, built here from source):
#
#   docker buildx build --platform linux/amd64,linux/arm64 \
#     --build-arg VERSION=0.1.0 --build-arg REVISION="$(git rev-parse HEAD)" \
#     -t opensandbox/sandbox-webhook:0.1.0 .
#
# Local (a binary built outside, `bench/flavours.sh path`, from the build
# context as sandbox-webhook-<arch>; docs/operations.md, "Image"):
#
#   podman build --build-arg BINARY=prebuilt -f Dockerfile -t ... CONTEXT_DIR
#
# Both end in the same final stage; BINARY only picks the stage the binary is
# copied from. The builder stage is not built (nor its base pulled) when
# BINARY=prebuilt, so the local build needs no registry.
#
# Why glibc, static: musl's allocator (one global lock) cost about 3x the CPU
# per review; glibc's, linked statically, costs what the benchmarks measure
# (bench/run.sh compares the flavours in one run: docs/performance.md,
# "Flavours"). glibc 2.36's static libc has the `files` and `dns` name
# services built in, so the controller resolves the apiserver's host name
# from /etc/hosts and /etc/resolv.conf, which the runtime provides; there is
# no nsswitch.conf, so no other service is ever loaded.
#
# The builder runs on the build machine's own platform ($BUILDPLATFORM) and
# cross-compiles for $TARGETARCH, so a multi-arch build needs no emulation.
#
# The builder's base image is pinned by digest (of its multi-platform index),
# so rebuilding a commit uses the same toolchain even after the tag moves. The
# tag stays in the reference for humans and for Renovate/Dependabot. To move
# to a newer one, replace the digest with the one the tag points at now:
#   docker buildx imagetools inspect rust:1.95-bookworm --format '{{json .Manifest.Digest}}'
# (or `crane digest IMAGE`). Release procedure: charts/sandbox-webhook/README.md,
# "Supply chain".

# builder (default) or prebuilt.
ARG BINARY=builder

FROM --platform=$BUILDPLATFORM rust:1.95-bookworm@sha256:6258907abe69656e41cd992e0b705cdcfabcbbe3db374f92ed2d47121282d4a1 AS builder
ARG TARGETARCH
ARG BUILDARCH
SHELL ["/bin/bash", "-o", "pipefail", "-c"]
WORKDIR /src

# Toolchain for the target: the Rust gnu target, and, when cross-compiling,
# gcc for the target architecture with its libc (libc6-dev-<arch>-cross has
# the static libc.a; ring's C code needs the headers). The rust image's own
# gcc and libc6-dev serve the native architecture. RUSTFLAGS reaches only the
# target's artifacts because the target is given (CARGO_BUILD_TARGET), so the
# build scripts and proc macros stay dynamic, as they must: the same build as
# `bench/flavours.sh path glibc-static`.
# hadolint ignore=DL3008
RUN --mount=type=cache,target=/var/cache/apt,sharing=locked \
    --mount=type=cache,target=/var/lib/apt/lists,sharing=locked \
    rm -f /etc/apt/apt.conf.d/docker-clean \
    && case "${TARGETARCH}" in \
         amd64) target=x86_64-unknown-linux-gnu;  gnu=x86_64-linux-gnu;  crossarch=x86-64; crosslibc=amd64 ;; \
         arm64) target=aarch64-unknown-linux-gnu; gnu=aarch64-linux-gnu; crossarch=aarch64; crosslibc=arm64 ;; \
         *) echo "unsupported TARGETARCH '${TARGETARCH}' (supported: amd64, arm64)" >&2; exit 1 ;; \
       esac \
    && if [ "${TARGETARCH}" = "${BUILDARCH}" ]; then cc="gcc"; ar="ar"; linker="cc"; \
       else cc="${gnu}-gcc"; ar="${gnu}-ar"; linker="${gnu}-gcc"; \
            apt-get update \
            && apt-get install -y --no-install-recommends "gcc-${crossarch}-linux-gnu" "libc6-dev-${crosslibc}-cross"; fi \
    && rustup target add "${target}" \
    && envtarget="$(echo "${target}" | tr 'a-z-' 'A-Z_')" \
    && { echo "export CARGO_BUILD_TARGET=${target}"; \
         echo "export RUSTFLAGS='-C target-feature=+crt-static'"; \
         echo "export CC_${target//-/_}=${cc}"; \
         echo "export AR_${target//-/_}=${ar}"; \
         echo "export CARGO_TARGET_${envtarget}_LINKER=${linker}"; } > /etc/cargo-target.env \
    && cat /etc/cargo-target.env

COPY . .

# Cache mounts keep the crates.io registry and the target directory between
# builds (one target cache per architecture); the binary is copied out of the
# cache mount because cache contents are not part of the image. A binary that
# came out dynamically linked fails the build here, not at run time.
RUN --mount=type=cache,target=/usr/local/cargo/registry,sharing=locked \
    --mount=type=cache,target=/usr/local/cargo/git,sharing=locked \
    --mount=type=cache,target=/src/target,id=sandbox-webhook-target-${TARGETARCH},sharing=locked \
    source /etc/cargo-target.env \
    && cargo build --release --locked --bin sandbox-webhook \
    && bin="target/${CARGO_BUILD_TARGET}/release/sandbox-webhook" \
    && if readelf -lW "${bin}" | grep -q 'program interpreter'; then echo "${bin} is not static" >&2; exit 1; fi \
    && mkdir -p /out \
    && cp "${bin}" /out/sandbox-webhook

# A binary built outside, from the build context (see the top).
FROM scratch AS prebuilt
ARG TARGETARCH
COPY sandbox-webhook-${TARGETARCH} /out/sandbox-webhook

FROM ${BINARY} AS binary

# The image: the binary and nothing else. It needs no CA certificates (the
# apiserver's CA comes from the service account or the kubeconfig, and the
# webhook makes no outgoing TLS connection), no /etc/passwd (the user is
# numeric; nothing looks a name up) and no writable path.
FROM scratch
ARG VERSION=0.1.0
ARG REVISION=unknown
ARG CREATED=unknown
ARG SOURCE=""
LABEL org.opencontainers.image.title="sandbox-webhook" \
      org.opencontainers.image.description="Kubernetes mutating admission webhook that completes OpenSandbox sandbox pods" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.source="${SOURCE}" \
      org.opencontainers.image.created="${CREATED}" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.vendor="OpenSandbox"
COPY --from=binary --chown=0:0 --chmod=0555 /out/sandbox-webhook /sandbox-webhook
USER 65532:65532
# 8443: HTTPS admission endpoint (POST /mutate); 8080: admin (/livez, /readyz, /metrics).
EXPOSE 8443 8080
ENTRYPOINT ["/sandbox-webhook"]
CMD ["serve", "--config", "/etc/sandbox-webhook/config/config.yaml", "--tls-cert", "/etc/sandbox-webhook/tls/tls.crt", "--tls-key", "/etc/sandbox-webhook/tls/tls.key"]
