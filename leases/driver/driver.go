// Package driver is for store implementers: the encodings of the lease
// protocol that a leases.Store and its leases.Membership write and read,
// which a service using a Store never needs. Package leases states the
// contract, and names the encodings it relies on here.
//
// # Membership rows
//
// Members heartbeat in membership rows of at most RowCapacity entries each:
// a member joins a row with room (leases.Membership.Join; the consumer
// chooses among a few rows drawn from its owner id), and stays in it for
// its incarnation's life; its incarnation names the row (IncarnationRow),
// so whoever reads a lease row knows where its holder heartbeats. A small
// header item (MemberHeaderKey) carries a roster version per row, bumped
// (leases.Membership.BumpRow) whenever a row's roster changes (a member
// joins, leaves, is found dead or removed), so that members re-read only
// the rows whose roster changed: one small read a round, whatever the
// fleet's size.
//
// Membership rows and the header are keyed beside the lease rows, in the
// same table: their keys start with '#', which no stream name contains and
// no ARN starts with, so they never collide with a lease key.
//
// # Rewind ids
//
// Every operator's rewind writes a new id on its row (leases.Lease.Rewind),
// made by NewRewindID; RewindAfter orders two of them.
package driver

import (
	"crypto/rand"
	"fmt"
	"strconv"
	"strings"
	"time"
)

const (
	// RowCapacity is the most entries a membership row holds: with owner
	// ids of up to 64 bytes a row stays under 1 KB, so that a heartbeat
	// costs one write unit.
	RowCapacity = 8
	// MaxMemberRows bounds the row numbers (a fleet of 32,768 members).
	MaxMemberRows = 4096
)

// memberPrefix starts the key of every membership row and of the header.
const memberPrefix = "#members"

// MemberHeaderKey is the key of the membership header item.
const MemberHeaderKey = memberPrefix

// MemberKey returns the key of membership row i, as a Store writes it:
// "#members:i".
func MemberKey(i int) string { return memberPrefix + ":" + strconv.Itoa(i) }

// IsMemberKey reports whether key (a row's key as text) is a membership
// row's or the header's.
func IsMemberKey(key string) bool { return strings.HasPrefix(key, memberPrefix) }

// NewIncarnation returns an incarnation id heartbeating in membership row
// row: "row.suffix". suffix is random (a process's own).
func NewIncarnation(row int, suffix string) string { return strconv.Itoa(row) + "." + suffix }

// IncarnationRow returns the membership row an incarnation heartbeats in,
// and false for an incarnation that names none (one of an earlier version).
func IncarnationRow(inc string) (int, bool) {
	i := strings.IndexByte(inc, '.')
	if i <= 0 {
		return 0, false
	}
	r, err := strconv.Atoi(inc[:i])
	if err != nil || r < 0 || r >= MaxMemberRows {
		return 0, false
	}
	return r, true
}

// NewRewindID returns a new id for an operator's rewind asked at now (see
// leases.Lease.Rewind): the time in milliseconds, in fixed-width hex, then
// random characters, so that of two rewinds of a shard the later's id
// tells (RewindAfter) even where both are lost with the table.
func NewRewindID(now time.Time) string {
	return fmt.Sprintf("%012x", now.UnixMilli()) + rand.Text()[:8]
}

// RewindAfter reports whether the rewind of id a was asked after that of
// id b: both ids of NewRewindID, a's time later than b's. Ids of other
// forms, or of the same millisecond, are not ordered.
func RewindAfter(a, b string) bool {
	ta, ok1 := rewindTime(a)
	tb, ok2 := rewindTime(b)
	return ok1 && ok2 && ta > tb
}

// rewindTime returns the time part of a NewRewindID id.
func rewindTime(id string) (string, bool) {
	if len(id) != 20 {
		return "", false
	}
	for _, c := range id[:12] {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return "", false
		}
	}
	return id[:12], true
}
