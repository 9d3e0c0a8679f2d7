# syntax=docker/dockerfile:1.7
#
# sandbox-webhook image: a static musl binary on distroless/static, non-root.
#
#   docker buildx build --platform linux/amd64,linux/arm64 \
#     --build-arg VERSION=0.1.0 --build-arg REVISION="$(git rev-parse HEAD)" \
#     -t opensandbox/sandbox-webhook:0.1.0 .
#
# The builder runs on the build machine's own platform ($BUILDPLATFORM) and
# cross-compiles for $TARGETARCH, so a multi-arch build needs no emulation.
#
# Both base images are pinned by digest (of their multi-platform index), so
# rebuilding a commit uses the same bases even after the tag moves. The tag
# stays in the reference for humans and for Renovate/Dependabot. To move to a
# newer base, replace the digest with the one the tag points at now:
#   docker buildx imagetools inspect rust:1.95-bookworm --format '{{json .Manifest.Digest}}'
#   docker buildx imagetools inspect gcr.io/distroless/static-debian12:nonroot --format '{{json .Manifest.Digest}}'
# (or `crane digest IMAGE`). Release procedure: charts/sandbox-webhook/README.md,
# "Supply chain".

FROM --platform=$BUILDPLATFORM rust:1.95-bookworm@sha256:6258907abe69656e41cd992e0b705cdcfabcbbe3db374f92ed2d47121282d4a1 AS builder
ARG TARGETARCH
ARG BUILDARCH
SHELL ["/bin/bash", "-o", "pipefail", "-c"]
WORKDIR /src

# Toolchain for the target: a musl Rust target, plus a C compiler for ring's
# C/assembly parts and, when cross-compiling, a linker for the target
# architecture (gcc-<arch>-linux-gnu with its libc headers: ring's C code
# includes <stdint.h>). Rust's musl targets link their own self-contained musl
# libc and start files, so the glibc cross gcc serves as the linker; the
# result is a static binary either way.
# hadolint ignore=DL3008
RUN --mount=type=cache,target=/var/cache/apt,sharing=locked \
    --mount=type=cache,target=/var/lib/apt/lists,sharing=locked \
    rm -f /etc/apt/apt.conf.d/docker-clean \
    && case "${TARGETARCH}" in \
         amd64) target=x86_64-unknown-linux-musl;  gnu=x86_64-linux-gnu;  crossarch=x86-64; crosslibc=amd64 ;; \
         arm64) target=aarch64-unknown-linux-musl; gnu=aarch64-linux-gnu; crossarch=aarch64; crosslibc=arm64 ;; \
         *) echo "unsupported TARGETARCH '${TARGETARCH}' (supported: amd64, arm64)" >&2; exit 1 ;; \
       esac \
    && if [ "${TARGETARCH}" = "${BUILDARCH}" ]; then pkgs=(musl-tools); cc="musl-gcc"; ar="ar"; linker="cc"; \
       else pkgs=("gcc-${crossarch}-linux-gnu" "libc6-dev-${crosslibc}-cross"); \
            cc="${gnu}-gcc"; ar="${gnu}-ar"; linker="${gnu}-gcc"; fi \
    && apt-get update \
    && apt-get install -y --no-install-recommends "${pkgs[@]}" \
    && rustup target add "${target}" \
    && envtarget="$(echo "${target}" | tr 'a-z-' 'A-Z_')" \
    && { echo "export CARGO_BUILD_TARGET=${target}"; \
         echo "export CC_${target//-/_}=${cc}"; \
         echo "export AR_${target//-/_}=${ar}"; \
         echo "export CARGO_TARGET_${envtarget}_LINKER=${linker}"; } > /etc/cargo-target.env \
    && cat /etc/cargo-target.env

COPY . .

# Cache mounts keep the crates.io registry and the target directory between
# builds (one target cache per architecture); the binary is copied out of the
# cache mount because cache contents are not part of the image.
RUN --mount=type=cache,target=/usr/local/cargo/registry,sharing=locked \
    --mount=type=cache,target=/usr/local/cargo/git,sharing=locked \
    --mount=type=cache,target=/src/target,id=sandbox-webhook-target-${TARGETARCH},sharing=locked \
    source /etc/cargo-target.env \
    && cargo build --release --locked --bin sandbox-webhook \
    && mkdir -p /out \
    && cp "target/${CARGO_BUILD_TARGET}/release/sandbox-webhook" /out/sandbox-webhook

FROM gcr.io/distroless/static-debian12:nonroot@sha256:afa5c872c891853ca7fcf1f12c3edb23f7eeef36189728842dd51042ff57f7ab
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
      org.opencontainers.image.vendor="OpenSandbox" \
      org.opencontainers.image.base.name="gcr.io/distroless/static-debian12:nonroot" \
      org.opencontainers.image.base.digest="sha256:afa5c872c891853ca7fcf1f12c3edb23f7eeef36189728842dd51042ff57f7ab"
COPY --from=builder --chown=0:0 --chmod=0555 /out/sandbox-webhook /sandbox-webhook
USER 65532:65532
# 8443: HTTPS admission endpoint (POST /mutate); 8080: admin (/livez, /readyz, /metrics).
EXPOSE 8443 8080
ENTRYPOINT ["/sandbox-webhook"]
CMD ["serve", "--config", "/etc/sandbox-webhook/config/config.yaml", "--tls-cert", "/etc/sandbox-webhook/tls/tls.crt", "--tls-key", "/etc/sandbox-webhook/tls/tls.key"]
