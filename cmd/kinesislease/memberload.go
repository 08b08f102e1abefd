package main

// What members shows of the fleet's load: each member's share of its
// fleet's load beside its fair share, and its hot shards by name.

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/kinesislease/kinesislease/internal/balance"
	"github.com/kinesislease/kinesislease/internal/kinesisx"
	"github.com/kinesislease/kinesislease/internal/plan"
)

// shareLoads sets each row's Share, Cost and FairShare over its fleet: the
// rows not leaving nor gone whose streams digest is the same as its own (an
// empty one, of a version before digests, matches any), as the members'
// plans count them by load (balance.FairShares; by count no utilization is
// published, and every cost is 1).
func shareLoads(rows []memberStatus) {
	planned := func(m memberStatus) bool {
		return !m.Leaving && (m.HeartbeatChange == nil || *m.HeartbeatChange != beatGone)
	}
	for i := range rows {
		m := &rows[i]
		if !planned(*m) {
			continue
		}
		var load int64
		var us []balance.Usage
		self := -1
		for j, o := range rows {
			if !planned(o) || m.streams != "" && o.streams != "" && o.streams != m.streams {
				continue
			}
			if j == i {
				self = len(us)
			}
			load += max(o.Load, 0)
			us = append(us, balance.Usage{Capacity: thousandths(o.Capacity), Load: o.Load, Utilization: thousandths(o.Utilization)})
		}
		fair, costs, _ := balance.FairShares(us, true)
		cost := float64(costs[self]) / 1000
		m.FairShare, m.Cost = &fair[self], &cost
		if load > 0 {
			share := float64(max(m.Load, 0)) / float64(load)
			m.Share = &share
		}
	}
}

// thousandths is a capacity or a utilization as published, in
// thousandths; 0 when none is (balance.Weight counts a capacity of 0 as 1).
func thousandths(c *float64) int64 {
	if c == nil {
		return 0
	}
	return int64(*c*1000 + 0.5)
}

// hotRef names a hot shard.
type hotRef struct{ stream, shard string }

// hotIDs lists the shards of streams (ListShards) and returns each one's
// id in the members' hot lists.
func (s *session) hotIDs(ctx context.Context, streams []string) (map[string]hotRef, error) {
	ids := map[string]hotRef{}
	for _, stream := range streams {
		shards, err := kinesisx.ListShards(ctx, s.kin, stream)
		if err != nil {
			ss := *s
			ss.stream = stream
			return nil, ss.kinesisErr("", "ListShards", errors.Unwrap(err))
		}
		name := kinesisx.Name(stream)
		for _, sh := range shards {
			id := aws.ToString(sh.ShardId)
			ids[balance.UnitID(plan.Unit{Stream: name, Shard: id})] = hotRef{name, id}
		}
	}
	return ids, nil
}

// resolveHot names the rows' hot shards found in ids.
func resolveHot(rows []memberStatus, ids map[string]hotRef) {
	for i := range rows {
		for j := range rows[i].Hot {
			if r, ok := ids[rows[i].Hot[j].ID]; ok {
				rows[i].Hot[j].Stream, rows[i].Hot[j].Shard = r.stream, r.shard
			}
		}
	}
}

// showShare renders a fraction as a percentage to one decimal; "-" for
// none.
func showShare(f *float64) string {
	if f == nil {
		return "-"
	}
	s := strconv.FormatFloat(*f*100, 'f', 1, 64)
	return strings.TrimSuffix(s, ".0") + "%"
}

// showFactor renders a factor as a decimal (1, 2.3, 1.15); "-" for none.
func showFactor(f *float64) string {
	if f == nil {
		return "-"
	}
	return strconv.FormatFloat(*f, 'f', -1, 64)
}

// showHot renders hot shards as shard=load, comma-separated: by shard id
// when it was resolved (stream/shard with several streams), else by the
// entry's id; "-" for none.
func showHot(hs []hotShard, streamNames bool) string {
	if len(hs) == 0 {
		return "-"
	}
	words := make([]string, len(hs))
	for i, h := range hs {
		name := h.ID
		switch {
		case h.Shard != "" && streamNames:
			name = h.Stream + "/" + h.Shard
		case h.Shard != "":
			name = h.Shard
		}
		words[i] = fmt.Sprintf("%s=%s", name, showRate(h.Load))
	}
	return strings.Join(words, ",")
}
