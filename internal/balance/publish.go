package balance

import (
	"cmp"
	"hash/fnv"
	"slices"
	"strconv"
	"strings"

	"github.com/kinesislease/kinesislease/internal/plan"
)

// MaxHot is how many hot shards a member publishes at most.
const MaxHot = 4

// HotFactor: a shard is hot when its load is above HotFactor times the
// mean load per shard of what its holder holds (or of the fleet, if that
// is lower).
const HotFactor = 2

// Quantize rounds v to two significant digits (1234 → 1200, 96,500 →
// 97,000), so that a member's entry changes only when its load does by a
// few percent. Negative values are 0.
func Quantize(v int64) int64 {
	if v <= 0 {
		return 0
	}
	p := int64(1)
	for v/p >= 100 {
		p *= 10
	}
	return (v + p/2) / p * p
}

// UnitID is the short id of a unit in a member's hot list: at most 6
// base-36 digits of a 31-bit hash of its stream and shard (the entry is
// billed by the byte). A hot id that matches another unit of the fleet's
// streams too is unlikely (one chance in 100,000 a hot unit at 20,000
// shards) and costs only a misjudged load, the same for every member.
func UnitID(u plan.Unit) string {
	h := fnv.New64a()
	h.Write([]byte(u.Stream))
	h.Write([]byte{0})
	h.Write([]byte(u.Shard))
	return strconv.FormatUint(h.Sum64()>>33, 36)
}

// A Hot is one hot shard of a member's entry.
type Hot struct {
	ID   string // UnitID
	Load int64  // bytes per second, quantized
}

// Summarize returns what a member publishes of the loads of the units it
// holds (bytes per second each): their total, quantized, and its hot
// units, encoded (EncodeHot): at most MaxHot, the hottest first, those
// above HotFactor times the mean load per unit of what it holds, or of the
// fleet (fleetMean, when it is known and lower). The units of gone (hot
// units it let go of lately, with their loads: see Handover) are named and
// counted in the total too, whatever their load, and lent (the load of
// units it handed over for load lately, not named) is counted in the
// total. It returns the units it names with their loads (named). A member
// holding nothing busy publishes 0 and "".
func Summarize(loads map[plan.Unit]int64, fleetMean int64, gone map[plan.Unit]int64, lent int64) (total int64, hot string, named map[plan.Unit]int64) {
	var sum int64
	for _, l := range loads {
		sum += max(l, 0)
	}
	mean := int64(0)
	if len(loads) > 0 {
		mean = sum / int64(len(loads))
	}
	if fleetMean > 0 && fleetMean < mean {
		mean = fleetMean
	}
	type unitHot struct {
		u plan.Unit
		h Hot
	}
	var hs []unitHot
	for u, l := range loads {
		if _, g := gone[u]; !g && l > HotFactor*mean && Quantize(l) > 0 {
			hs = append(hs, unitHot{u, Hot{ID: UnitID(u), Load: Quantize(l)}})
		}
	}
	sum += max(lent, 0)
	for u, l := range gone {
		sum += max(l, 0)
		if Quantize(l) > 0 {
			hs = append(hs, unitHot{u, Hot{ID: UnitID(u), Load: Quantize(l)}})
		}
	}
	if sum == 0 {
		return 0, "", nil
	}
	slices.SortFunc(hs, func(a, b unitHot) int {
		return cmp.Or(cmp.Compare(b.h.Load, a.h.Load), strings.Compare(a.h.ID, b.h.ID))
	})
	hs = hs[:min(len(hs), MaxHot)]
	out := make([]Hot, len(hs))
	for i, h := range hs {
		out[i] = h.h
		if named == nil {
			named = map[plan.Unit]int64{}
		}
		named[h.u] = h.h.Load
	}
	return Quantize(sum), EncodeHot(out), named
}

// EncodeHot writes hot units as the words "id:load", separated by spaces,
// each load as a mantissa and a power of ten ("12e5" for 1,200,000).
func EncodeHot(hs []Hot) string {
	var b strings.Builder
	for i, h := range hs {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(h.ID)
		b.WriteByte(':')
		m, e := h.Load, 0
		for m >= 10 && m%10 == 0 {
			m, e = m/10, e+1
		}
		b.WriteString(strconv.FormatInt(m, 10))
		if e > 0 {
			b.WriteByte('e')
			b.WriteString(strconv.Itoa(e))
		}
	}
	return b.String()
}

// DecodeHot reads what EncodeHot wrote; a malformed word is skipped (an
// entry from a later version may say more).
func DecodeHot(s string) []Hot {
	var hs []Hot
	for w := range strings.FieldsSeq(s) {
		id, l, ok := strings.Cut(w, ":")
		if !ok || id == "" {
			continue
		}
		ms, es, _ := strings.Cut(l, "e")
		m, err := strconv.ParseInt(ms, 10, 64)
		if err != nil || m < 0 {
			continue
		}
		e := 0
		if es != "" {
			if e, err = strconv.Atoi(es); err != nil || e < 0 || e > 15 {
				continue
			}
		}
		for ; e > 0 && m <= plan.MaxLoad; e-- {
			m *= 10
		}
		if m > plan.MaxLoad {
			m = plan.MaxLoad
		}
		hs = append(hs, Hot{ID: id, Load: m})
	}
	return hs
}
