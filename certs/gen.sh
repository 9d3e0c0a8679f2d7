#!/usr/bin/env bash
# Create a private CA and a serving certificate for the sandbox-webhook
# Service (<service>.<namespace>.svc), for certificates.mode=existingSecret or
# for running the webhook outside the cluster (webhook.url).
#
# Usage: certs/gen.sh [-s SERVICE] [-n NAMESPACE] [-o OUT_DIR] [--dns NAME]... [--ip IP]...
#
#   -s, --service NAME    Service name        (env SERVICE,   default sandbox-webhook)
#   -n, --namespace NS    its namespace       (env NAMESPACE, default opensandbox-system)
#   -o, --out DIR         output directory    (env OUT_DIR,   default certs/dev)
#       --dns NAME        extra DNS SAN (repeatable), e.g. localhost
#       --ip IP           extra IP SAN (repeatable), e.g. 127.0.0.1
#       --days N          validity of the serving certificate; the CA gets twice that
#                         (env DAYS, default 365)
#       --openssl         use openssl even when the sandbox-webhook binary is available
#
# Writes OUT_DIR/ca.crt, OUT_DIR/tls.crt, OUT_DIR/tls.key (ECDSA P-256).
# Uses `sandbox-webhook certs` when $SANDBOX_WEBHOOK points at the binary or it
# is on PATH, and openssl otherwise. The CA's private key is not kept: to
# rotate, run the script again and replace both the Secret and the caBundle.
# Never commit the output (certs/.gitignore ignores it).
set -euo pipefail

SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
service="${SERVICE:-sandbox-webhook}"
namespace="${NAMESPACE:-opensandbox-system}"
out="${OUT_DIR:-$SCRIPT_DIR/dev}"
days="${DAYS:-365}"
extra_dns=()
extra_ips=()
force_openssl=0

usage() { sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed -e '$d' -e 's/^# \{0,1\}//'; }
die() { printf 'gen.sh: %s\n' "$*" >&2; exit 1; }

while [[ $# -gt 0 ]]; do
    case "$1" in
        -s|--service) service="${2:?--service needs a value}"; shift 2 ;;
        -n|--namespace) namespace="${2:?--namespace needs a value}"; shift 2 ;;
        -o|--out) out="${2:?--out needs a value}"; shift 2 ;;
        --dns) extra_dns+=("${2:?--dns needs a value}"); shift 2 ;;
        --ip) extra_ips+=("${2:?--ip needs a value}"); shift 2 ;;
        --days) days="${2:?--days needs a value}"; shift 2 ;;
        --openssl) force_openssl=1; shift ;;
        -h|--help) usage; exit 0 ;;
        *) usage >&2; die "unknown argument: $1" ;;
    esac
done

label='^[a-z0-9]([-a-z0-9]*[a-z0-9])?$'
[[ "$service" =~ $label ]] || die "service '$service' is not a DNS label"
[[ "$namespace" =~ $label ]] || die "namespace '$namespace' is not a DNS label"
[[ "$days" =~ ^[1-9][0-9]*$ ]] || die "--days must be a positive integer"

dns=("$service" "$service.$namespace" "$service.$namespace.svc" "$service.$namespace.svc.cluster.local")
dns+=("${extra_dns[@]+"${extra_dns[@]}"}")
mkdir -p "$out"

bin="${SANDBOX_WEBHOOK:-}"
if (( force_openssl )); then
    bin=""
elif [[ -z "$bin" ]] && command -v sandbox-webhook >/dev/null 2>&1; then
    bin="$(command -v sandbox-webhook)"
fi

if [[ -n "$bin" ]]; then
    [[ -x "$bin" ]] || die "SANDBOX_WEBHOOK=$bin is not executable"
    args=(certs --out "$out" --days "$days")
    for d in "${dns[@]}"; do args+=(--dns "$d"); done
    for i in "${extra_ips[@]+"${extra_ips[@]}"}"; do args+=(--ip "$i"); done
    printf 'gen.sh: %s %s\n' "$bin" "${args[*]}" >&2
    "$bin" "${args[@]}"
else
    command -v openssl >/dev/null 2>&1 || die "neither sandbox-webhook (set \$SANDBOX_WEBHOOK) nor openssl is available"
    printf 'gen.sh: using openssl (%s)\n' "$(openssl version)" >&2
    tmp="$(mktemp -d)"
    trap 'rm -rf "$tmp"' EXIT
    umask 077
    san=""
    for d in "${dns[@]}"; do san+="${san:+,}DNS:$d"; done
    for i in "${extra_ips[@]+"${extra_ips[@]}"}"; do san+=",IP:$i"; done

    openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$tmp/ca.key" 2>/dev/null
    cat >"$tmp/ca.ext" <<EOF
basicConstraints = critical,CA:TRUE,pathlen:0
keyUsage = critical,keyCertSign,cRLSign
subjectKeyIdentifier = hash
EOF
    openssl req -new -key "$tmp/ca.key" -subj "/CN=$service-ca" -out "$tmp/ca.csr"
    openssl x509 -req -in "$tmp/ca.csr" -signkey "$tmp/ca.key" -days "$((days * 2))" \
        -sha256 -extfile "$tmp/ca.ext" -out "$tmp/ca.crt" 2>/dev/null

    openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$tmp/tls.key" 2>/dev/null
    cat >"$tmp/tls.ext" <<EOF
basicConstraints = critical,CA:FALSE
keyUsage = critical,digitalSignature
extendedKeyUsage = serverAuth
subjectKeyIdentifier = hash
authorityKeyIdentifier = keyid
subjectAltName = $san
EOF
    openssl req -new -key "$tmp/tls.key" -subj "/CN=$service.$namespace.svc" -out "$tmp/tls.csr"
    openssl x509 -req -in "$tmp/tls.csr" -CA "$tmp/ca.crt" -CAkey "$tmp/ca.key" -CAcreateserial \
        -days "$days" -sha256 -extfile "$tmp/tls.ext" -out "$tmp/tls.crt" 2>/dev/null
    openssl verify -CAfile "$tmp/ca.crt" "$tmp/tls.crt" >/dev/null

    install -m 0644 "$tmp/ca.crt" "$out/ca.crt"
    install -m 0644 "$tmp/tls.crt" "$out/tls.crt"
    install -m 0600 "$tmp/tls.key" "$out/tls.key"
fi

for f in ca.crt tls.crt tls.key; do
    [[ -s "$out/$f" ]] || die "$out/$f was not written"
done

cat >&2 <<EOF
gen.sh: wrote $out/{ca.crt,tls.crt,tls.key} for ${dns[2]}

Install with certificates.mode=existingSecret:
  kubectl create namespace $namespace --dry-run=client -o yaml | kubectl apply -f -
  kubectl -n $namespace create secret tls $service-tls --cert=$out/tls.crt --key=$out/tls.key
  helm install $service charts/sandbox-webhook -n $namespace \\
    --set fullnameOverride=$service \\
    --set certificates.mode=existingSecret \\
    --set certificates.existingSecret.name=$service-tls \\
    --set-file webhook.caBundle=$out/ca.crt
EOF
