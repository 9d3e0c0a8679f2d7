# shellcheck shell=bash
# Part of tests/e2e/cluster.sh (sourced there, not run): the control plane's
# certificates (one CA for the apiserver, its clients and the admin user;
# the ServiceAccount signing key pair) and the admin kubeconfig.

gen_certs() {
    local d="$1"
    cat >"$d/openssl.cnf" <<'EOF'
[ req ]
distinguished_name = dn
prompt = no
[ dn ]
CN = unused
[ v3_ca ]
basicConstraints = critical, CA:TRUE
keyUsage = critical, keyCertSign, cRLSign, digitalSignature
subjectKeyIdentifier = hash
[ v3_server ]
basicConstraints = critical, CA:FALSE
keyUsage = critical, digitalSignature, keyEncipherment
extendedKeyUsage = serverAuth
subjectAltName = IP:127.0.0.1, DNS:localhost, IP:10.0.0.1, DNS:kubernetes, DNS:kubernetes.default, DNS:kubernetes.default.svc
[ v3_client ]
basicConstraints = critical, CA:FALSE
keyUsage = critical, digitalSignature, keyEncipherment
extendedKeyUsage = clientAuth
EOF
    local q=(-config "$d/openssl.cnf")
    openssl ecparam -name prime256v1 -genkey -noout -out "$d/ca.key" 2>/dev/null
    openssl req -x509 -new -key "$d/ca.key" "${q[@]}" -extensions v3_ca -subj "/CN=sandbox-webhook-e2e-ca" \
        -days 3650 -out "$d/ca.crt"

    openssl ecparam -name prime256v1 -genkey -noout -out "$d/apiserver.key" 2>/dev/null
    openssl req -new -key "$d/apiserver.key" "${q[@]}" -subj "/CN=kube-apiserver" -out "$d/apiserver.csr"
    openssl x509 -req -in "$d/apiserver.csr" -CA "$d/ca.crt" -CAkey "$d/ca.key" -CAcreateserial \
        -extfile "$d/openssl.cnf" -extensions v3_server -days 3650 -out "$d/apiserver.crt" 2>/dev/null

    # Admin user: the system:masters group is bound to cluster-admin by RBAC bootstrap.
    openssl ecparam -name prime256v1 -genkey -noout -out "$d/admin.key" 2>/dev/null
    openssl req -new -key "$d/admin.key" "${q[@]}" -subj "/O=system:masters/CN=sandbox-webhook-e2e-admin" \
        -out "$d/admin.csr"
    openssl x509 -req -in "$d/admin.csr" -CA "$d/ca.crt" -CAkey "$d/ca.key" -CAcreateserial \
        -extfile "$d/openssl.cnf" -extensions v3_client -days 3650 -out "$d/admin.crt" 2>/dev/null

    # Service-account token signing key pair.
    openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out "$d/sa.key" 2>/dev/null
    openssl pkey -in "$d/sa.key" -pubout -out "$d/sa.pub"
    rm -f "$d/apiserver.csr" "$d/admin.csr"
    chmod 600 "$d"/*.key
}

write_kubeconfig() {
    local d="$1" server="$2"
    local ca cert key
    ca="$(base64 -w0 <"$d/ca.crt")"
    cert="$(base64 -w0 <"$d/admin.crt")"
    key="$(base64 -w0 <"$d/admin.key")"
    cat >"$d/kubeconfig.tmp" <<EOF
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
    chmod 600 "$d/kubeconfig.tmp"
    mv -f "$d/kubeconfig.tmp" "$d/kubeconfig"
}
