// Package route adds and deletes "prohibit" routes in the network
// namespace of the calling process, over rtnetlink (linux/rtnetlink.h):
// a prohibited destination answers connect() with EACCES. The stand-in
// egress sidecar enforces a policy's IP and CIDR deny rules this way (it
// needs NET_ADMIN, as the real sidecar does for nftables), and the attack
// program tries to delete them (which only NET_ADMIN allows).
package route

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"syscall"
)

const (
	rtmNewRoute   = 24
	rtmDelRoute   = 25
	rtaDst        = 1
	rtTableMain   = 254
	rtprotStatic  = 4
	rtScopeGlobal = 0
	rtnProhibit   = 8
)

// Prohibit adds a prohibit route to prefix (IPv4) in the main table.
func Prohibit(prefix netip.Prefix) error {
	return request(rtmNewRoute, syscall.NLM_F_CREATE|syscall.NLM_F_EXCL, prefix)
}

// Allow deletes the prohibit route to prefix.
func Allow(prefix netip.Prefix) error {
	return request(rtmDelRoute, 0, prefix)
}

// request sends one route message and waits for the kernel's answer.
func request(kind uint16, flags uint16, prefix netip.Prefix) error {
	if !prefix.Addr().Is4() {
		return fmt.Errorf("%v: IPv4 only", prefix)
	}
	fd, err := syscall.Socket(syscall.AF_NETLINK, syscall.SOCK_RAW|syscall.SOCK_CLOEXEC, syscall.NETLINK_ROUTE)
	if err != nil {
		return fmt.Errorf("netlink socket: %w", err)
	}
	defer syscall.Close(fd)
	addr := prefix.Masked().Addr().As4()
	// struct rtmsg, then one rtattr (RTA_DST) with the address.
	body := []byte{syscall.AF_INET, byte(prefix.Bits()), 0, 0, rtTableMain, rtprotStatic, rtScopeGlobal, rtnProhibit, 0, 0, 0, 0}
	attr := make([]byte, 8)
	binary.NativeEndian.PutUint16(attr[0:], 8)
	binary.NativeEndian.PutUint16(attr[2:], rtaDst)
	copy(attr[4:], addr[:])
	body = append(body, attr...)
	msg := make([]byte, 16, 16+len(body))
	binary.NativeEndian.PutUint32(msg[0:], uint32(16+len(body)))
	binary.NativeEndian.PutUint16(msg[4:], kind)
	binary.NativeEndian.PutUint16(msg[6:], syscall.NLM_F_REQUEST|syscall.NLM_F_ACK|flags)
	binary.NativeEndian.PutUint32(msg[8:], 1)
	msg = append(msg, body...)
	if err := syscall.Sendto(fd, msg, 0, &syscall.SockaddrNetlink{Family: syscall.AF_NETLINK}); err != nil {
		return fmt.Errorf("netlink send: %w", err)
	}
	buf := make([]byte, 4096)
	n, _, err := syscall.Recvfrom(fd, buf, 0)
	if err != nil {
		return fmt.Errorf("netlink receive: %w", err)
	}
	// An NLMSG_ERROR answer: its errno (0 is the acknowledgement).
	if n >= 20 && binary.NativeEndian.Uint16(buf[4:]) == syscall.NLMSG_ERROR {
		if errno := int32(binary.NativeEndian.Uint32(buf[16:])); errno != 0 {
			return syscall.Errno(-errno)
		}
		return nil
	}
	return fmt.Errorf("netlink: unexpected answer of %d bytes", n)
}
