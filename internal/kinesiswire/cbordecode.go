package kinesiswire

// The fast decoder of GetRecords' answers in CBOR (decodeCBORGetRecords):
// straight into the output, the records' data slices of the answer, their
// strings slices of one; errNotFast for an answer it leaves to the SDK.

import (
	"errors"
	"slices"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
)

// errNotFast: a well-formed answer that decodeCBORGetRecords leaves to the
// SDK's decoder (through JSON).
var errNotFast = errors.New("kinesiswire: not for the fast decoder")

// decodeCBORGetRecords decodes a GetRecords answer in CBOR into out. It
// takes Records (Data, PartitionKey, SequenceNumber,
// ApproximateArrivalTimestamp, EncryptionType; other members are skipped,
// as the SDK skips members it does not know), NextShardIterator and
// MillisBehindLatest; child shards, and any member it knows in a shape it
// does not, are errNotFast. Nulls are absent members.
func decodeCBORGetRecords(p []byte, out *kinesis.GetRecordsOutput) error {
	err := decodeCBORRecords(p, out)
	if errors.Is(err, errShape) {
		return errNotFast
	}
	return err
}

func decodeCBORRecords(p []byte, out *kinesis.GetRecordsOutput) error {
	r := cborReader{p: p}
	n, err := r.container(cborMap)
	if err != nil {
		return err
	}
	var (
		recs  []types.Record
		spans []span // PartitionKey, SequenceNumber, EncryptionType of each record, in text
		times []time.Time
		text  []byte // the strings, concatenated
		data  []byte // data sent as base64 text, decoded
		next  span
	)
	addText := func(s []byte) span {
		start := len(text)
		text = append(text, s...)
		return span{start, len(text), true}
	}
	for i := 0; r.more(n, i); i++ {
		k, err := r.text()
		if err != nil {
			return err
		}
		if r.isNull() {
			continue
		}
		switch string(k) {
		case "Records":
			rn, err := r.container(cborArray)
			if err != nil {
				return err
			}
			if rn != cborIndefinite {
				rn := min(rn, uint64(len(r.p)-r.i)/16) // a record takes 16 bytes at least: no count a malformed answer claims is allocated
				recs = make([]types.Record, 0, rn)
				spans = make([]span, 0, 3*rn)
				times = make([]time.Time, 0, rn)
				text = slices.Grow(text, 80*int(rn)) // the iterator may have come first
			}
			for j := 0; r.more(rn, j); j++ {
				fn, err := r.container(cborMap)
				if err != nil {
					return err
				}
				var rec types.Record
				var fields [3]span
				var at time.Time
				for f := 0; r.more(fn, f); f++ {
					fk, err := r.text()
					if err != nil {
						return err
					}
					if r.isNull() {
						continue
					}
					switch string(fk) {
					case "Data":
						rec.Data, data, err = r.blob(data)
					case "ApproximateArrivalTimestamp":
						at, err = r.timestamp()
					case "PartitionKey":
						fields[0], err = textSpan(&r, addText)
					case "SequenceNumber":
						fields[1], err = textSpan(&r, addText)
					case "EncryptionType":
						fields[2], err = textSpan(&r, addText)
					default:
						err = r.skip(0)
					}
					if err != nil {
						return err
					}
				}
				if rec.Data == nil {
					rec.Data = []byte{}
				}
				recs = append(recs, rec)
				spans = append(spans, fields[:]...)
				times = append(times, at)
			}
		case "NextShardIterator":
			v, err := r.text()
			if err != nil {
				return err
			}
			next = addText(v)
		case "MillisBehindLatest":
			v, err := r.integer()
			if err != nil {
				return err
			}
			out.MillisBehindLatest = &v
		case "ChildShards":
			cn, err := r.container(cborArray)
			if err != nil {
				return err
			}
			if r.more(cn, 0) {
				return errShape // a closed shard's end: the SDK's decoder
			}
		default:
			if err := r.skip(0); err != nil {
				return err
			}
		}
	}
	if r.i != len(r.p) {
		return errCBOR
	}
	out.Records, out.NextShardIterator = finishRecords(recs, spans, times, text, next)
	return nil
}

// textSpan reads a text string and adds it to the text with add.
func textSpan(r *cborReader, add func([]byte) span) (span, error) {
	v, err := r.text()
	if err != nil {
		return span{}, err
	}
	return add(v), nil
}
