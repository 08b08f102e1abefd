// Package kpl splits records written by Amazon's Kinesis Producer Library in
// its aggregated form into their user records.
//
// An aggregated record's data is the magic bytes F3 89 9A C2, a protobuf
// AggregatedRecord (a table of partition keys, a table of explicit hash
// keys, and the user records, each naming its keys by index) and the MD5 of
// the protobuf bytes. Data without the magic bytes is not aggregated.
// https://github.com/awslabs/amazon-kinesis-producer/blob/master/aggregation-format.md
//
// HashKey, HashRange and UserRecord.HashKey tell whether a user record
// belongs to a shard: after a reshard, an aggregate put by a KPL with a
// stale shard map can hold user records of another shard, which the KPL
// puts again there; the consumer skips them where they do not belong, as
// KCL does (see docs/kpl.md).
package kpl

import (
	"bytes"
	"crypto/md5"
	"errors"
	"fmt"

	"google.golang.org/protobuf/encoding/protowire"
)

// Magic starts the data of every aggregated record.
var Magic = []byte{0xF3, 0x89, 0x9A, 0xC2}

// ErrCorrupt is matched (errors.Is) by every error Split returns for data that
// starts with Magic but is not a valid aggregate: a bad checksum, truncated
// data, bad protobuf, or a key index out of range.
var ErrCorrupt = errors.New("kpl: corrupt aggregated record")

// UserRecord is one record of an aggregate.
type UserRecord struct {
	PartitionKey    string
	ExplicitHashKey string // empty when the producer set none
	Data            []byte // a sub-slice of the aggregate's data
}

// IsAggregated reports whether data starts with the magic bytes and is long
// enough to hold a checksum.
func IsAggregated(data []byte) bool {
	return len(data) >= len(Magic)+md5.Size && bytes.Equal(data[:len(Magic)], Magic)
}

// Split returns the user records of an aggregated record's data, in order
// (the i-th is the record's sub-sequence number i). For data that is not
// aggregated it returns nil, nil. Returned Data slices alias data.
func Split(data []byte) ([]UserRecord, error) {
	if len(data) < len(Magic) || !bytes.Equal(data[:len(Magic)], Magic) {
		return nil, nil
	}
	if len(data) < len(Magic)+md5.Size {
		return nil, fmt.Errorf("%w: %d bytes, too short for a checksum", ErrCorrupt, len(data))
	}
	body := data[len(Magic) : len(data)-md5.Size]
	sum := md5.Sum(body)
	if !bytes.Equal(sum[:], data[len(data)-md5.Size:]) {
		return nil, fmt.Errorf("%w: MD5 checksum mismatch", ErrCorrupt)
	}

	type raw struct {
		pk, ehk    uint64
		hasPK, ehs bool
		data       []byte
	}
	var (
		pks, ehks []string
		records   []raw
	)
	for len(body) > 0 {
		num, typ, n := protowire.ConsumeTag(body)
		if n < 0 {
			return nil, fmt.Errorf("%w: %v", ErrCorrupt, protowire.ParseError(n))
		}
		body = body[n:]
		if typ != protowire.BytesType || num < 1 || num > 3 {
			// Unknown fields are skipped, as protobuf requires.
			n = protowire.ConsumeFieldValue(num, typ, body)
			if n < 0 {
				return nil, fmt.Errorf("%w: field %d: %v", ErrCorrupt, num, protowire.ParseError(n))
			}
			body = body[n:]
			continue
		}
		v, n := protowire.ConsumeBytes(body)
		if n < 0 {
			return nil, fmt.Errorf("%w: field %d: %v", ErrCorrupt, num, protowire.ParseError(n))
		}
		body = body[n:]
		switch num {
		case 1:
			pks = append(pks, string(v))
		case 2:
			ehks = append(ehks, string(v))
		case 3:
			var r raw
			for len(v) > 0 {
				fnum, ftyp, m := protowire.ConsumeTag(v)
				if m < 0 {
					return nil, fmt.Errorf("%w: record %d: %v", ErrCorrupt, len(records), protowire.ParseError(m))
				}
				v = v[m:]
				switch {
				case fnum == 1 && ftyp == protowire.VarintType:
					r.pk, m = protowire.ConsumeVarint(v)
					r.hasPK = true
				case fnum == 2 && ftyp == protowire.VarintType:
					r.ehk, m = protowire.ConsumeVarint(v)
					r.ehs = true
				case fnum == 3 && ftyp == protowire.BytesType:
					r.data, m = protowire.ConsumeBytes(v)
					if r.data == nil && m >= 0 {
						r.data = []byte{}
					}
				default:
					m = protowire.ConsumeFieldValue(fnum, ftyp, v) // tags and unknown fields
				}
				if m < 0 {
					return nil, fmt.Errorf("%w: record %d field %d: %v", ErrCorrupt, len(records), fnum, protowire.ParseError(m))
				}
				v = v[m:]
			}
			if !r.hasPK || r.data == nil {
				return nil, fmt.Errorf("%w: record %d lacks its partition key index or data", ErrCorrupt, len(records))
			}
			records = append(records, r)
		}
	}
	if len(records) == 0 {
		return nil, fmt.Errorf("%w: no user records", ErrCorrupt)
	}
	out := make([]UserRecord, len(records))
	for i, r := range records {
		if r.pk >= uint64(len(pks)) {
			return nil, fmt.Errorf("%w: record %d: partition key index %d of %d", ErrCorrupt, i, r.pk, len(pks))
		}
		out[i] = UserRecord{PartitionKey: pks[r.pk], Data: r.data}
		if r.ehs {
			if r.ehk >= uint64(len(ehks)) {
				return nil, fmt.Errorf("%w: record %d: explicit hash key index %d of %d", ErrCorrupt, i, r.ehk, len(ehks))
			}
			out[i].ExplicitHashKey = ehks[r.ehk]
		}
	}
	return out, nil
}

// Aggregate builds an aggregated record's data from user records, in the
// format Split reads and the KPL writes. It is for tests and producers that
// aggregate; the consumer does not need it.
func Aggregate(records []UserRecord) []byte {
	var body []byte
	pkIndex := map[string]uint64{}
	ehkIndex := map[string]uint64{}
	var pkTable, ehkTable []byte
	for _, r := range records {
		if _, ok := pkIndex[r.PartitionKey]; !ok {
			pkIndex[r.PartitionKey] = uint64(len(pkIndex))
			pkTable = protowire.AppendTag(pkTable, 1, protowire.BytesType)
			pkTable = protowire.AppendString(pkTable, r.PartitionKey)
		}
		if r.ExplicitHashKey != "" {
			if _, ok := ehkIndex[r.ExplicitHashKey]; !ok {
				ehkIndex[r.ExplicitHashKey] = uint64(len(ehkIndex))
				ehkTable = protowire.AppendTag(ehkTable, 2, protowire.BytesType)
				ehkTable = protowire.AppendString(ehkTable, r.ExplicitHashKey)
			}
		}
	}
	body = append(body, pkTable...)
	body = append(body, ehkTable...)
	for _, r := range records {
		var rec []byte
		rec = protowire.AppendTag(rec, 1, protowire.VarintType)
		rec = protowire.AppendVarint(rec, pkIndex[r.PartitionKey])
		if r.ExplicitHashKey != "" {
			rec = protowire.AppendTag(rec, 2, protowire.VarintType)
			rec = protowire.AppendVarint(rec, ehkIndex[r.ExplicitHashKey])
		}
		rec = protowire.AppendTag(rec, 3, protowire.BytesType)
		rec = protowire.AppendBytes(rec, r.Data)
		body = protowire.AppendTag(body, 3, protowire.BytesType)
		body = protowire.AppendBytes(body, rec)
	}
	sum := md5.Sum(body)
	out := append(append(append([]byte{}, Magic...), body...), sum[:]...)
	return out
}
