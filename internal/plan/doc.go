// Package plan decides which member reads which shard: pure functions of
// the members and the units (the shards of all the streams of a service),
// that every member computes from its own view with no leader, so that
// members with the same view compute the same plan (no randomness, clock
// or map order; integer arithmetic only).
//
//   - Assign and Planner.Assign: the count plan of equal members, balanced
//     in total and per stream, sticky (rendezvous scores), capped by one
//     maxLeases for all.
//   - AssignWeighted and Planner.AssignWeighted: members with a capacity
//     and a cap of their own (Member), balanced by count in proportion to
//     the capacities, or by load (Balance.ByLoad): each member's share of
//     the units' load in proportion to its capacity within a tolerance,
//     starting from the count plan and moving only what the tolerance
//     calls for. With equal capacities and caps the count mode is Assign.
//   - Mover: the hysteresis on the side of the member that lets go: a unit
//     moved for load is handed over only after the plan has said so for a
//     hold time, never soon after its take, and a few a minute at most;
//     units that move because members came or went go at once.
//   - Decide: what one member does with a plan in one round.
//
// docs/balance.md explains the two modes and the defaults.
package plan
