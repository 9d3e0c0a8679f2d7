// egress stands in for OpenSandbox's egress sidecar (opensandbox/egress),
// which cannot be pulled here. It keeps the part of its contract the
// webhook relies on and reports what it sees:
//   - it logs its environment (the token by length only) and its
//     effective capabilities;
//   - its initial policy is OPENSANDBOX_EGRESS_RULES, unless
//     OPENSANDBOX_EGRESS_POLICY_FILE names a file that exists and holds a
//     policy: that file wins, as it does for the real sidecar (which also
//     saves each policy change there);
//   - it takes a few seconds to put its rules in place (the real one
//     starts a DNS proxy and programs iptables and nftables first), and
//     only then listens on port 18080: GET /healthz answering means the
//     rules exist, which is what the webhook's startup probe waits for;
//   - its rules need NET_ADMIN, as the real one's do: it sets the MTU of
//     the pod's loopback interface to 65520 (the pod's other containers
//     see it) and enforces each deny rule whose target is an IP or CIDR
//     as a "prohibit" route (connect() gets EACCES). It exits 1, loudly,
//     when the kernel refuses either. Names and defaultAction are not
//     enforced: nothing leaves the test bridge anyway;
//   - GET /healthz answers 200 only with the header
//     OPENSANDBOX-EGRESS-AUTH equal to $OPENSANDBOX_EGRESS_TOKEN, 401
//     otherwise, and POST /policy with that header replaces the policy
//     (its routes, and the policy file), as the real API does.
package main

import (
	"crypto/subtle"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/netip"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"sandbox-webhook/tests/image/node/internal/report"
	"sandbox-webhook/tests/image/node/internal/route"
)

const (
	addr       = ":18080"
	authHeader = "OPENSANDBOX-EGRESS-AUTH"
	tokenEnv   = "OPENSANDBOX_EGRESS_TOKEN"
	rulesEnv   = "OPENSANDBOX_EGRESS_RULES"
	fileEnv    = "OPENSANDBOX_EGRESS_POLICY_FILE"
	mtu        = 65520
	// How long the stand-in takes to put its rules in place.
	setup = 3 * time.Second
)

// policy is the sidecar's policy document.
type policy struct {
	DefaultAction string `json:"defaultAction,omitempty"`
	Egress        []rule `json:"egress"`
}

type rule struct {
	Action string `json:"action"`
	Target string `json:"target"`
}

// enforcer holds the prohibit routes of the current policy.
type enforcer struct {
	mu         sync.Mutex
	prohibited []netip.Prefix
}

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
	file := strings.TrimSpace(os.Getenv(fileEnv))
	initial := initialPolicy(file)

	time.Sleep(setup)
	before, err := setMTU("lo", mtu)
	if err != nil {
		log.Fatalf("FATAL: setting the MTU of lo needs NET_ADMIN: %v", err)
	}
	log.Printf("NET_ADMIN: set the MTU of lo to %d (was %d)", mtu, before)
	var rules enforcer
	if err := rules.apply(initial); err != nil {
		log.Fatalf("FATAL: putting the rules in place needs NET_ADMIN: %v", err)
	}
	log.Printf("rules in place: prohibited %v", rules.prohibited)

	var served, refused atomic.Int64
	authorized := func(w http.ResponseWriter, r *http.Request) bool {
		got := r.Header.Get(authHeader)
		if subtle.ConstantTimeCompare([]byte(got), []byte(token)) == 1 {
			return true
		}
		n := refused.Add(1)
		log.Printf("%s %s: 401 to %s (%q, %s header %s); refusal %d", r.Method, r.URL.Path, r.RemoteAddr, r.UserAgent(), authHeader, missingOrWrong(got), n)
		http.Error(w, "missing or wrong "+authHeader, http.StatusUnauthorized)
		return false
	}
	http.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) {
		if !authorized(w, r) {
			return
		}
		if served.Add(1) == 1 {
			log.Printf("healthz: 200 to %s (%q) with the right %s header (first one; later ones are not logged)", r.RemoteAddr, r.UserAgent(), authHeader)
		}
		_, _ = w.Write([]byte("ok\n"))
	})
	http.HandleFunc("POST /policy", func(w http.ResponseWriter, r *http.Request) {
		if !authorized(w, r) {
			return
		}
		body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		var p policy
		if err == nil {
			err = json.Unmarshal(body, &p)
		}
		if err != nil {
			http.Error(w, "invalid policy: "+err.Error(), http.StatusBadRequest)
			return
		}
		if err := rules.apply(p); err != nil {
			log.Printf("policy API: applying %s: %v", body, err)
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		if file != "" {
			if err := save(file, body); err != nil {
				log.Printf("policy API: saving %s: %v", file, err)
			}
		}
		log.Printf("policy API: policy replaced by %s: %s; prohibited now %v", r.RemoteAddr, body, rules.prohibited)
		_, _ = w.Write([]byte(`{"status":"ok"}` + "\n"))
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

// initialPolicy is the policy file's when it exists and holds a policy,
// else the rules' env var (the real sidecar's order).
func initialPolicy(file string) policy {
	var p policy
	if file != "" {
		raw, err := os.ReadFile(file)
		switch {
		case err == nil && len(strings.TrimSpace(string(raw))) > 0 && json.Unmarshal(raw, &p) == nil:
			log.Printf("loaded egress policy from %s: %s", file, strings.TrimSpace(string(raw)))
			return p
		case err != nil && !os.IsNotExist(err):
			log.Fatalf("FATAL: reading the policy file %s: %v", file, err)
		}
	}
	raw := os.Getenv(rulesEnv)
	if strings.TrimSpace(raw) == "" {
		log.Printf("no %s: the default policy (deny all, not enforced here)", rulesEnv)
		return p
	}
	if err := json.Unmarshal([]byte(raw), &p); err != nil {
		log.Fatalf("FATAL: %s is not a policy: %v", rulesEnv, err)
	}
	log.Printf("loaded egress policy from env %s: %s", rulesEnv, raw)
	return p
}

// apply replaces the prohibit routes with those of p's deny rules whose
// target is an IP or a CIDR.
func (e *enforcer) apply(p policy) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	var want []netip.Prefix
	for _, r := range p.Egress {
		if !strings.EqualFold(r.Action, "deny") {
			continue
		}
		if prefix, err := netip.ParsePrefix(r.Target); err == nil {
			want = append(want, prefix.Masked())
		} else if a, err := netip.ParseAddr(r.Target); err == nil {
			want = append(want, netip.PrefixFrom(a, a.BitLen()))
		}
	}
	for _, old := range e.prohibited {
		if err := route.Allow(old); err != nil && err != syscall.ESRCH {
			return fmt.Errorf("removing the route to %v: %w", old, err)
		}
	}
	e.prohibited = nil
	for _, prefix := range want {
		if err := route.Prohibit(prefix); err != nil {
			return fmt.Errorf("prohibiting %v: %w", prefix, err)
		}
		e.prohibited = append(e.prohibited, prefix)
	}
	return nil
}

// save writes the policy file whole (a temporary file renamed over it).
func save(file string, body []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(file), ".policy-*")
	if err != nil {
		return err
	}
	if _, err := tmp.Write(body); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), file)
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
