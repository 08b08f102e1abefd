package kinesiswire

// The server's side of GetRecords in CBOR, for the Kinesis fake and the
// bench: the answers they send (EncodeGetRecordsOutputCBOR,
// EncodeErrorCBOR) and the request they read (DecodeGetRecordsInputCBOR).

import (
	"math"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
)

// EncodeGetRecordsOutputCBOR encodes out as Kinesis answers GetRecords in
// CBOR: data as byte strings, timestamps as tag 1 and an integer of epoch
// milliseconds, absent members left out. Test servers use it.
func EncodeGetRecordsOutputCBOR(out *kinesis.GetRecordsOutput) []byte {
	w := cborWriter{b: make([]byte, 0, 256+len(out.Records)*160)}
	n := 1
	if out.NextShardIterator != nil {
		n++
	}
	if out.MillisBehindLatest != nil {
		n++
	}
	if out.ChildShards != nil {
		n++
	}
	w.head(cborMap, uint64(n))
	if out.ChildShards != nil {
		w.text("ChildShards")
		w.head(cborArray, uint64(len(out.ChildShards)))
		for _, c := range out.ChildShards {
			k := 1
			if c.ShardId != nil {
				k++
			}
			if c.HashKeyRange != nil {
				k++
			}
			w.head(cborMap, uint64(k))
			if c.HashKeyRange != nil {
				w.text("HashKeyRange")
				w.head(cborMap, 2)
				w.text("EndingHashKey")
				w.text(aws.ToString(c.HashKeyRange.EndingHashKey))
				w.text("StartingHashKey")
				w.text(aws.ToString(c.HashKeyRange.StartingHashKey))
			}
			w.text("ParentShards")
			w.head(cborArray, uint64(len(c.ParentShards)))
			for _, p := range c.ParentShards {
				w.text(p)
			}
			if c.ShardId != nil {
				w.text("ShardId")
				w.text(*c.ShardId)
			}
		}
	}
	if out.MillisBehindLatest != nil {
		w.text("MillisBehindLatest")
		w.int(*out.MillisBehindLatest)
	}
	if out.NextShardIterator != nil {
		w.text("NextShardIterator")
		w.text(*out.NextShardIterator)
	}
	w.text("Records")
	w.head(cborArray, uint64(len(out.Records)))
	for _, r := range out.Records {
		k := 1
		for _, set := range []bool{r.ApproximateArrivalTimestamp != nil, r.EncryptionType != "", r.PartitionKey != nil, r.SequenceNumber != nil} {
			if set {
				k++
			}
		}
		w.head(cborMap, uint64(k))
		if r.ApproximateArrivalTimestamp != nil {
			w.text("ApproximateArrivalTimestamp")
			w.head(cborTag, 1)
			w.int(r.ApproximateArrivalTimestamp.UnixMilli())
		}
		w.text("Data")
		w.head(cborBytes, uint64(len(r.Data)))
		w.b = append(w.b, r.Data...)
		if r.EncryptionType != "" {
			w.text("EncryptionType")
			w.text(string(r.EncryptionType))
		}
		if r.PartitionKey != nil {
			w.text("PartitionKey")
			w.text(*r.PartitionKey)
		}
		if r.SequenceNumber != nil {
			w.text("SequenceNumber")
			w.text(*r.SequenceNumber)
		}
	}
	return w.b
}

// EncodeErrorCBOR encodes an error answer in CBOR: __type and message.
func EncodeErrorCBOR(code, msg string) []byte {
	w := cborWriter{}
	w.head(cborMap, 2)
	w.text("__type")
	w.text(code)
	w.text("message")
	w.text(msg)
	return w.b
}

// DecodeGetRecordsInputCBOR decodes a GetRecords request in CBOR (test
// servers use it).
func DecodeGetRecordsInputCBOR(p []byte) (*kinesis.GetRecordsInput, error) {
	r := cborReader{p: p}
	n, err := r.container(cborMap)
	if err != nil {
		return nil, err
	}
	in := &kinesis.GetRecordsInput{}
	for i := 0; r.more(n, i); i++ {
		k, err := r.text()
		if err != nil {
			return nil, err
		}
		switch string(k) {
		case "ShardIterator", "StreamARN":
			v, err := r.text()
			if err != nil {
				return nil, err
			}
			if string(k) == "ShardIterator" {
				in.ShardIterator = aws.String(string(v))
			} else {
				in.StreamARN = aws.String(string(v))
			}
		case "Limit":
			v, err := r.integer()
			if err != nil || v < math.MinInt32 || v > math.MaxInt32 {
				return nil, errCBOR
			}
			in.Limit = aws.Int32(int32(v))
		default:
			if err := r.skip(0); err != nil {
				return nil, err
			}
		}
	}
	if r.i != len(r.p) {
		return nil, errCBOR
	}
	return in, nil
}
