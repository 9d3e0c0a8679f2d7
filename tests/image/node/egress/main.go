// egress stands in for OpenSandbox's egress sidecar (opensandbox/egress),
// which cannot be pulled here. It keeps the part of its contract the
// webhook relies on and reports what it sees:
//   - it logs its environment (the token by length only) and its
//     effective capabilities;
//   - it needs NET_ADMIN, as the real one does for its nftables rules: it
//     sets the MTU of the pod's loopback interface to 65520 and exits 1,
//     loudly, when the kernel refuses (the sidecar then never becomes
//     ready). The pod's other containers can read the new MTU: they share
//     the network namespace;
//   - GET /healthz on port 18080 answers 200 only with the header
//     OPENSANDBOX-EGRESS-AUTH equal to $OPENSANDBOX_EGRESS_TOKEN, 401
//     otherwise.
package main

import (
	"crypto/subtle"
	"fmt"
	"log"
	"net/http"
	"os"
	"os/signal"
	"sort"
	"strings"
	"sync/atomic"
	"syscall"
	"unsafe"

	"sandbox-webhook/tests/image/node/internal/report"
)

const (
	addr       = ":18080"
	authHeader = "OPENSANDBOX-EGRESS-AUTH"
	tokenEnv   = "OPENSANDBOX_EGRESS_TOKEN"
	mtu        = 65520
)

func main() {
	report.Setup("egress")
	env := os.Environ()
	sort.Strings(env)
	for _, kv := range env {
		if name, value, _ := strings.Cut(kv, "="); name == tokenEnv {
			kv = fmt.Sprintf("%s=<%d characters>", name, len(value))
		}
		log.Printf("env %s", kv)
	}
	log.Printf("stand-in started: %s, CapEff %s", report.Identity(), report.CapEff())
	token := os.Getenv(tokenEnv)
	if token == "" {
		log.Fatalf("FATAL: %s is empty: the webhook always sets it", tokenEnv)
	}
	before, err := setMTU("lo", mtu)
	if err != nil {
		log.Fatalf("FATAL: setting the MTU of lo needs NET_ADMIN: %v", err)
	}
	log.Printf("NET_ADMIN: set the MTU of lo to %d (was %d)", mtu, before)

	var served, refused atomic.Int64
	http.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) {
		got := r.Header.Get(authHeader)
		if subtle.ConstantTimeCompare([]byte(got), []byte(token)) != 1 {
			n := refused.Add(1)
			log.Printf("healthz: 401 to %s (%q, %s header %s); refusal %d", r.RemoteAddr, r.UserAgent(), authHeader, missingOrWrong(got), n)
			http.Error(w, "missing or wrong "+authHeader, http.StatusUnauthorized)
			return
		}
		if served.Add(1) == 1 {
			log.Printf("healthz: 200 to %s (%q) with the right %s header (first one; later ones are not logged)", r.RemoteAddr, r.UserAgent(), authHeader)
		}
		_, _ = w.Write([]byte("ok\n"))
	})
	go func() {
		signals := make(chan os.Signal, 1)
		signal.Notify(signals, syscall.SIGINT, syscall.SIGTERM)
		s := <-signals
		log.Printf("%v: exiting after %d healthz answered 200, %d refused", s, served.Load(), refused.Load())
		os.Exit(0)
	}()
	log.Printf("listening on %s", addr)
	log.Fatal(http.ListenAndServe(addr, nil))
}

func missingOrWrong(got string) string {
	if got == "" {
		return "missing"
	}
	return "wrong"
}

// ifreq is struct ifreq (linux/if.h) with the ifr_mtu member of its union:
// 16 bytes of name, then the union, 40 bytes in all.
type ifreq struct {
	name [16]byte
	mtu  int32
	_    [20]byte
}

// setMTU sets the MTU of interface name with SIOCSIFMTU (which needs
// CAP_NET_ADMIN whatever the value) and returns the MTU it had.
func setMTU(name string, value int32) (int32, error) {
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_DGRAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return 0, err
	}
	defer syscall.Close(fd)
	var req ifreq
	copy(req.name[:], name)
	if err := ioctl(fd, syscall.SIOCGIFMTU, &req); err != nil {
		return 0, fmt.Errorf("reading the MTU of %s: %w", name, err)
	}
	before := req.mtu
	req.mtu = value
	if err := ioctl(fd, syscall.SIOCSIFMTU, &req); err != nil {
		return before, fmt.Errorf("SIOCSIFMTU %s %d: %w", name, value, err)
	}
	return before, nil
}

func ioctl(fd int, request uintptr, req *ifreq) error {
	_, _, errno := syscall.Syscall(syscall.SYS_IOCTL, uintptr(fd), request, uintptr(unsafe.Pointer(req)))
	if errno != 0 {
		return errno
	}
	return nil
}
