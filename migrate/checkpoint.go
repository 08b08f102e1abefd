package migrate

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/kinesislease/kinesislease/leases"
)

// The KCL's checkpoint sentinels (SentinelCheckpoint.java).
const (
	kclTrimHorizon = "TRIM_HORIZON"
	kclLatest      = "LATEST"
	kclAtTimestamp = "AT_TIMESTAMP"
	kclShardEnd    = "SHARD_END"
)

// isDigits reports whether s is a sequence number: digits only.
func isDigits(s string) bool {
	return s != "" && strings.Trim(s, "0123456789") == ""
}

// FromKCL returns the kinesislease checkpoint that resumes a shard where a
// KCL worker resumes from its checkpoint (seq, sub): the checkpoint and
// checkpointSubSequenceNumber attributes of its lease. records is the number
// of user records of the Kinesis record seq: n for a KPL aggregate of n, 1
// for a plain record (or one no longer in the stream). at is the time of the
// application's AT_TIMESTAMP initial position; a checkpoint AT_TIMESTAMP
// without it is refused with ErrNeedTimestamp. An empty seq gives the zero
// Checkpoint (none). The package documentation lists every case.
func FromKCL(seq string, sub int64, records int, at time.Time) (leases.Checkpoint, error) {
	switch seq {
	case "":
		return leases.Checkpoint{}, nil
	case kclShardEnd:
		return leases.Checkpoint{Sequence: leases.ShardEnd}, nil
	case kclTrimHorizon:
		return leases.Checkpoint{Sequence: leases.RewindTrimHorizon}, nil
	case kclLatest:
		return leases.Checkpoint{Sequence: leases.RewindLatest}, nil
	case kclAtTimestamp:
		if at.IsZero() {
			return leases.Checkpoint{}, ErrNeedTimestamp
		}
		return leases.RewindAtTimestamp(at), nil
	}
	if !isDigits(seq) {
		return leases.Checkpoint{}, fmt.Errorf("%w: checkpoint %q is neither a sequence number nor a KCL sentinel", ErrSchema, seq)
	}
	switch {
	case sub < 0:
		// Nothing of seq done (Export's form of AT_SEQUENCE_NUMBER:seq).
		return leases.RewindAtSequence(seq), nil
	case sub+1 < int64(records):
		// User records 0..sub of the aggregate done: sub+1 of them.
		return leases.Checkpoint{Sequence: seq, SubSequence: sub + 1}, nil
	}
	return leases.Checkpoint{Sequence: seq}, nil
}

// FromVMware returns the kinesislease checkpoint for vmware-go-kcl's
// Checkpoint attribute: the last record processed, whole (vmware-go-kcl
// resumes AFTER_SEQUENCE_NUMBER and keeps no sub-sequence), or SHARD_END. An
// empty seq gives the zero Checkpoint (none).
func FromVMware(seq string) (leases.Checkpoint, error) {
	switch {
	case seq == "":
		return leases.Checkpoint{}, nil
	case seq == kclShardEnd:
		return leases.Checkpoint{Sequence: leases.ShardEnd}, nil
	case isDigits(seq):
		return leases.Checkpoint{Sequence: seq}, nil
	}
	return leases.Checkpoint{}, fmt.Errorf("%w: checkpoint %q is neither a sequence number nor SHARD_END", ErrSchema, seq)
}

// ToKCL returns the KCL checkpoint (checkpoint, checkpointSubSequenceNumber)
// at which a KCL worker resumes a shard where kinesislease resumes from cp:
// FromKCL(ToKCL(cp, records), records) is cp again, for every cp but one
// AT_TIMESTAMP:<t> (the KCL keeps no time in its table: pass t to FromKCL).
// records is as for FromKCL, for the record cp.Sequence; it matters only for
// a whole record (SubSequence 0). The zero Checkpoint has no KCL form.
func ToKCL(cp leases.Checkpoint, records int) (seq string, sub int64, err error) {
	if cp.IsZero() {
		return "", 0, fmt.Errorf("%w: no checkpoint to translate", ErrInvalid)
	}
	seq, sub, _, err = toKCL(cp, records)
	return seq, sub, err
}

// toKCL is ToKCL, with a note that explains what the KCL does when the
// translation is not exact.
func toKCL(cp leases.Checkpoint, records int) (seq string, sub int64, note string, err error) {
	s := cp.Sequence
	switch {
	case s == leases.ShardEnd:
		return kclShardEnd, 0, "", nil
	case s == leases.RewindTrimHorizon:
		return kclTrimHorizon, 0, "", nil
	case s == leases.RewindLatest:
		return kclLatest, 0, "", nil
	case strings.HasPrefix(s, leases.AtSequencePrefix):
		return strings.TrimPrefix(s, leases.AtSequencePrefix), -1, "", nil
	case strings.HasPrefix(s, leases.AtTimestampPrefix):
		ms, perr := strconv.ParseInt(strings.TrimPrefix(s, leases.AtTimestampPrefix), 10, 64)
		if perr != nil {
			return "", 0, "", fmt.Errorf("%w: checkpoint %q: bad time", ErrSchema, s)
		}
		t := time.UnixMilli(ms).UTC().Format(time.RFC3339Nano)
		return kclAtTimestamp, 0, "the KCL keeps no time in its table: it starts this shard at its configured AT_TIMESTAMP initial position; ours was " + t +
			" (import it back with that time)", nil
	case !isDigits(s):
		return "", 0, "", fmt.Errorf("%w: checkpoint %q is not a sequence number", ErrSchema, s)
	case cp.SubSequence > 0:
		return s, cp.SubSequence - 1, "", nil
	}
	return s, int64(max(records, 1)) - 1, "", nil
}

// progress orders checkpoints by how much of a shard they mark done.
type progress struct {
	rank int    // 0: nothing processed (none, or a start position); 1: a sequence number; 2: SHARD_END
	seq  string // rank 1
	last int64  // rank 1: the last user record of seq done: -1 none, math.MaxInt64 all
}

// oursProgress is how far our checkpoint cp says the shard is done.
func oursProgress(cp leases.Checkpoint) progress {
	s := cp.Sequence
	switch {
	case s == leases.ShardEnd:
		return progress{rank: 2}
	case strings.HasPrefix(s, leases.AtSequencePrefix):
		return progress{rank: 1, seq: strings.TrimPrefix(s, leases.AtSequencePrefix), last: -1}
	case !isDigits(s):
		return progress{} // none, TRIM_HORIZON, LATEST, AT_TIMESTAMP
	case cp.SubSequence > 0:
		return progress{rank: 1, seq: s, last: cp.SubSequence - 1}
	}
	return progress{rank: 1, seq: s, last: math.MaxInt64}
}

// kclProgress is how far the KCL checkpoint (seq, sub) says the shard is
// done, as ExtendedSequenceNumber.compareTo orders them.
func kclProgress(seq string, sub int64) progress {
	switch {
	case seq == kclShardEnd:
		return progress{rank: 2}
	case isDigits(seq):
		return progress{rank: 1, seq: seq, last: sub}
	}
	return progress{}
}

// cmp compares p and q: negative when p marks less done than q.
func (p progress) cmp(q progress) int {
	if p.rank != q.rank {
		return p.rank - q.rank
	}
	if p.rank != 1 {
		return 0
	}
	if c := cmpSeq(p.seq, q.seq); c != 0 {
		return c
	}
	switch {
	case p.last < q.last:
		return -1
	case p.last > q.last:
		return 1
	}
	return 0
}

// cmpSeq compares two sequence numbers (decimal digits) numerically.
func cmpSeq(a, b string) int {
	a, b = strings.TrimLeft(a, "0"), strings.TrimLeft(b, "0")
	if len(a) != len(b) {
		return len(a) - len(b)
	}
	return strings.Compare(a, b)
}

// showOurs renders our checkpoint as `kinesislease status` does.
func showOurs(cp leases.Checkpoint) string {
	if cp.IsZero() {
		return "-"
	}
	if ms, ok := strings.CutPrefix(cp.Sequence, leases.AtTimestampPrefix); ok {
		if n, err := strconv.ParseInt(ms, 10, 64); err == nil {
			return leases.AtTimestampPrefix + time.UnixMilli(n).UTC().Format(time.RFC3339Nano)
		}
	}
	return cp.String()
}

// showKCL renders a KCL checkpoint.
func showKCL(seq string, sub int64, hasSub bool) string {
	switch {
	case seq == "":
		return "-"
	case hasSub && (sub != 0 || isDigits(seq)):
		return fmt.Sprintf("%s sub %d", seq, sub)
	}
	return seq
}
