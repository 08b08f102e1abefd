package kltype

// LeaseStoreCalls counts the lease store calls of a service, for cost
// measurements (kinesislease.Service.LeaseStoreCalls).
type LeaseStoreCalls struct {
	// Reads counts strongly consistent reads (GetItems on DynamoDB): of
	// lease rows and of membership rows.
	Reads int64
	// Writes counts conditional writes: creates, takes, checkpoints,
	// releases, rewinds, heartbeats and other membership writes.
	Writes int64
	// Heartbeats counts heartbeats (writes, included in Writes) and
	// MemberReads the reads of membership rows (included in Reads).
	Heartbeats, MemberReads int64
}
