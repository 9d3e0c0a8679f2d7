# shellcheck shell=bash
# Part of tests/e2e/cluster.sh (sourced there, not run): the control plane's
# certificates (one CA for the apiserver, its clients and the admin user;
# the ServiceAccount signing key pair) and kubeconfigs.

# gen_certs DIR [EXTRA_SAN]: the CA, the apiserver's serving certificate
# (EXTRA_SAN, e.g. `IP:10.201.7.1`, is added to its names), the admin client
# certificate and the ServiceAccount signing key pair.
gen_certs() {
    local d="$1" extra_san="${2:-}"
    {
        cat <<EOF
[ req ]
distinguished_name = dn
prompt = no
[ dn ]
CN = unused
[ v3_ca ]
basicConstraints = critical, CA:TRUE
keyUsage = critical, keyCertSign, cRLSign, digitalSignature
subjectKeyIdentifier = hash
EOF
        leaf_extensions v3_server serverAuth \
            "IP:127.0.0.1, DNS:localhost, IP:10.0.0.1, DNS:kubernetes, DNS:kubernetes.default, DNS:kubernetes.default.svc${extra_san:+, $extra_san}"
        leaf_extensions v3_client clientAuth
    } >"$d/openssl.cnf"
    openssl ecparam -name prime256v1 -genkey -noout -out "$d/ca.key" 2>/dev/null
    openssl req -x509 -new -key "$d/ca.key" -config "$d/openssl.cnf" -extensions v3_ca \
        -subj "/CN=sandbox-webhook-e2e-ca" -days 3650 -out "$d/ca.crt"
    sign_cert "$d" apiserver "/CN=kube-apiserver" v3_server
    # Admin user: the system:masters group is bound to cluster-admin by RBAC bootstrap.
    sign_cert "$d" admin "/O=system:masters/CN=sandbox-webhook-e2e-admin" v3_client

    # Service-account token signing key pair.
    openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out "$d/sa.key" 2>/dev/null
    openssl pkey -in "$d/sa.key" -pubout -out "$d/sa.pub"
    chmod 600 "$d"/*.key
}

# leaf_extensions SECTION USAGE [SAN]: the openssl.cnf section SECTION of a
# leaf certificate (not a CA) for USAGE (serverAuth, clientAuth), with the
# subjectAltName SAN when given.
leaf_extensions() {
    printf '[ %s ]\n' "$1"
    echo "basicConstraints = critical, CA:FALSE"
    echo "keyUsage = critical, digitalSignature, keyEncipherment"
    echo "extendedKeyUsage = $2"
    [[ -z "${3:-}" ]] || echo "subjectAltName = $3"
}

# sign_cert DIR NAME SUBJECT EXTENSIONS [CONFIG]: DIR/NAME.key (P-256) and
# DIR/NAME.crt for SUBJECT, signed by DIR's CA with the EXTENSIONS section of
# CONFIG (default DIR/openssl.cnf).
sign_cert() {
    local d="$1" name="$2" subj="$3" ext="$4" cnf="${5:-$1/openssl.cnf}"
    openssl ecparam -name prime256v1 -genkey -noout -out "$d/$name.key" 2>/dev/null
    openssl req -new -key "$d/$name.key" -config "$cnf" -subj "$subj" -out "$d/$name.csr"
    openssl x509 -req -in "$d/$name.csr" -CA "$d/ca.crt" -CAkey "$d/ca.key" -CAcreateserial \
        -extfile "$cnf" -extensions "$ext" -days 3650 -out "$d/$name.crt" 2>/dev/null
    rm -f "$d/$name.csr"
    chmod 600 "$d/$name.key"
}

# write_kubeconfig DIR SERVER [USER [FILE]]: a kubeconfig for SERVER with
# DIR/USER.crt and .key (default: admin, into DIR/kubeconfig).
write_kubeconfig() {
    local d="$1" server="$2" user="${3:-admin}" file="${4:-$1/kubeconfig}"
    local ca cert key
    ca="$(base64 -w0 <"$d/ca.crt")"
    cert="$(base64 -w0 <"$d/$user.crt")"
    key="$(base64 -w0 <"$d/$user.key")"
    cat >"$file.tmp" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: sandbox-webhook-e2e
  cluster:
    server: $server
    certificate-authority-data: $ca
users:
- name: admin
  user:
    client-certificate-data: $cert
    client-key-data: $key
contexts:
- name: sandbox-webhook-e2e
  context:
    cluster: sandbox-webhook-e2e
    user: admin
    namespace: default
current-context: sandbox-webhook-e2e
EOF
    chmod 600 "$file.tmp"
    mv -f "$file.tmp" "$file"
}
