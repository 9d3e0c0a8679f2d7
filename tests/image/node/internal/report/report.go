// Package report is what the stand-ins say about themselves in their logs:
// who they run as and with which effective capabilities, read the way a
// test reads them (/proc/self/status), so a log line is evidence.
package report

import (
	"fmt"
	"log"
	"os"
	"strconv"
	"strings"
)

// Capability bits (linux/capability.h) the tests look for.
var named = []struct {
	name string
	bit  uint
}{{"NET_ADMIN", 12}, {"NET_RAW", 13}, {"SYS_ADMIN", 21}}

// CapEff is the CapEff line of /proc/self/status: the hex mask and the
// named capabilities it holds, e.g. "00000000a80425fb (NET_ADMIN=no ...)".
func CapEff() string {
	status, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return "unknown (" + err.Error() + ")"
	}
	for _, line := range strings.Split(string(status), "\n") {
		hex, ok := strings.CutPrefix(line, "CapEff:")
		if !ok {
			continue
		}
		hex = strings.TrimSpace(hex)
		mask, err := strconv.ParseUint(hex, 16, 64)
		if err != nil {
			return hex + " (unparsable)"
		}
		parts := make([]string, 0, len(named))
		for _, c := range named {
			has := "no"
			if mask&(1<<c.bit) != 0 {
				has = "yes"
			}
			parts = append(parts, c.name+"="+has)
		}
		return hex + " (" + strings.Join(parts, " ") + ")"
	}
	return "unknown (no CapEff line)"
}

// Identity is "uid=U gid=G pid=P".
func Identity() string {
	return fmt.Sprintf("uid=%d gid=%d pid=%d", os.Getuid(), os.Getgid(), os.Getpid())
}

// Setup makes the standard logger write "NAME: message" lines to stdout
// (the container log), without timestamps: the runtime adds its own.
func Setup(name string) {
	log.SetFlags(0)
	log.SetPrefix(name + ": ")
	log.SetOutput(os.Stdout)
}
