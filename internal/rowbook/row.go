package rowbook

// What a read, a write or a recovery seen leaves known of a row
// (lostrow.Row): the book's own bookkeeping, apart from the decisions
// package lostrow makes on a row.

import "github.com/kinesislease/kinesislease/internal/lostrow"

// after returns what is known once a read or a write found r (Missing, or
// its Lease) at now, after old: a row missing keeps the row and Seen, the
// first read that found it dates it; Knew, recoveries, reports stay.
func after(r, old lostrow.Row, now int64) lostrow.Row {
	if r.Missing {
		r.Lease, r.Seen = old.Lease, old.Seen
		r.MissingSince, r.Reported = now, false
		if old.Missing {
			r.MissingSince, r.Reported = old.MissingSince, old.Reported
		}
	} else {
		r.Seen = true
	}
	if lostrow.NoStart(r.Lease) && r.Knew.IsZero() {
		r.Knew = old.Best()
	}
	r.Recovery, r.RecoveredAt, r.ReportDue = old.Recovery, old.RecoveredAt, old.ReportDue || r.ReportDue
	if r.Lease.Token == old.MarkFor {
		r.MarkTok, r.MarkFor = old.MarkTok, old.MarkFor
	}
	r.Earlier = old.Earlier
	if rec := r.Lease.Recovered; rec != "" {
		r = saw(r, rec, now)
	}
	return r
}

// saw returns r knowing recovery rec from now on, unless it knew it
// before: a recovery seen again keeps its first sighting, even after
// another was seen between (seed 95805621: an orphan waiting for the
// recovery its undone take made, while answers showed a later one, waited
// for ever; seeds 97301047, 97301425: two recoveries in turn must not
// restart each other's wait).
func saw(r lostrow.Row, rec string, now int64) lostrow.Row {
	if rec == r.Recovery {
		return r
	}
	at, earlier := now, lostrow.Sighting{Rec: r.Recovery, At: r.RecoveredAt}
	kept := [len(r.Earlier)]lostrow.Sighting{}
	n := 0
	if earlier.Rec != "" {
		kept[n], n = earlier, n+1
	}
	for _, s := range r.Earlier {
		switch {
		case s.Rec == rec:
			at = s.At
		case s.Rec != "" && n < len(kept):
			kept[n], n = s, n+1
		}
	}
	r.Recovery, r.RecoveredAt, r.Earlier = rec, at, kept
	return r
}

// recoveredSince is when this instance first saw recovery rec; now if never.
func recoveredSince(r lostrow.Row, rec string, now int64) int64 {
	if r.Recovery == rec {
		return r.RecoveredAt
	}
	for _, s := range r.Earlier {
		if s.Rec == rec && s.Rec != "" {
			return s.At
		}
	}
	return now
}
