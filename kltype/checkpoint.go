package kltype

import "fmt"

// Checkpoint is how far a shard has been processed: every record before
// Sequence is done, and so is Sequence itself unless SubSequence says only
// part of it is. Lease stores name it leases.Checkpoint.
type Checkpoint struct {
	// Sequence is a Kinesis sequence number, or "SHARD_END"
	// (leases.ShardEnd) for a shard read to its end. Empty means no
	// checkpoint yet: the reader starts where the subscription says.
	Sequence string
	// SubSequence is, for a KPL aggregate processed in part, how many of its
	// user records are done (the next one to process has this index); 0
	// when the record Sequence is done entirely.
	SubSequence int64
}

// IsZero reports whether c is "no checkpoint".
func (c Checkpoint) IsZero() bool { return c.Sequence == "" && c.SubSequence == 0 }

// String returns the sequence number, with "/sub" when SubSequence is set.
func (c Checkpoint) String() string {
	if c.SubSequence != 0 {
		return fmt.Sprintf("%s/%d", c.Sequence, c.SubSequence)
	}
	return c.Sequence
}
