package leases

// MembershipStore is a Store that keeps membership too: the lease store the
// consumer runs on (kinesislease.WithLeaseStore takes one), since it takes
// leases with Membership.TakeAs and heartbeats in membership rows. Both
// stores of this module (memory and dynamo) are one. A Store for another
// database implements both interfaces ("Writing a Store" in the package
// documentation); a wrapper around a store (for metrics, or faults in a
// test) embeds a MembershipStore so that it keeps every method.
type MembershipStore interface {
	Store
	Membership
}
