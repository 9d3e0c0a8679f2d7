// The stand-in programs of the real node's images (tests/e2e/cluster.sh
// builds them; tests/image/node/README.md says what each one keeps of the
// real image's contract). The Go standard library only.
module sandbox-webhook/tests/image/node

go 1.26.0
