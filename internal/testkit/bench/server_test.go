package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	ktypes "github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/kinesislease/kinesislease/codec"
	"github.com/kinesislease/kinesislease/internal/kinesiswire"
)

func startTestServer(t *testing.T, ds *Dataset) *kinesis.Client {
	t.Helper()
	srv, err := StartServer(ds, true)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	kc, _, closeIdle := newClient(srv.URL)
	t.Cleanup(closeIdle)
	return kc
}

// checkRecords checks that recs are records from..from+len(recs) of shard s.
func checkRecords(t *testing.T, ds *Dataset, s, from int, recs []ktypes.Record) {
	t.Helper()
	for j, r := range recs {
		i := from + j
		if got, want := aws.ToString(r.SequenceNumber), Seq(s, i); got != want {
			t.Fatalf("shard %d record %d: sequence number %s, want %s", s, i, got, want)
		}
		if !bytes.Equal(r.Data, ds.Data(s, i)) {
			t.Fatalf("shard %d record %d: data %q, want %q", s, i, r.Data, ds.Data(s, i))
		}
		if len(r.Data) != ds.DataLen && !ds.msgpack { // MessagePack's integers vary in length
			t.Fatalf("shard %d record %d: %d bytes of data, want %d", s, i, len(r.Data), ds.DataLen)
		}
		var o Order
		unmarshal := json.Unmarshal
		if ds.msgpack {
			unmarshal = codec.Msgpack.Unmarshal
		}
		if err := unmarshal(r.Data, &o); err != nil {
			t.Fatalf("shard %d record %d: %v", s, i, err)
		}
		if o.ID != int64(s)*1_000_000_000+int64(i) || len(o.Items) != 2 || o.Customer == "" {
			t.Fatalf("shard %d record %d: decoded %+v", s, i, o)
		}
		if pk := aws.ToString(r.PartitionKey); pk != o.Customer {
			t.Fatalf("shard %d record %d: partition key %q, want %q", s, i, pk, o.Customer)
		}
		if at := aws.ToTime(r.ApproximateArrivalTimestamp); !at.Equal(ds.Arrival(i)) {
			t.Fatalf("shard %d record %d: arrival %v, want %v", s, i, at, ds.Arrival(i))
		}
	}
}

func TestServerWithSDK(t *testing.T) {
	for _, lazy := range []bool{false, true} {
		name := "eager"
		size := 0
		if lazy {
			name, size = "lazy", 1024
		}
		t.Run(name, func(t *testing.T) {
			ds := NewDataset("orders", 3, 250, size, lazy)
			kc := startTestServer(t, ds)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()

			// ListShards, paged.
			var ids []string
			in := &kinesis.ListShardsInput{StreamName: aws.String("orders"), MaxResults: aws.Int32(2)}
			for {
				out, err := kc.ListShards(ctx, in)
				if err != nil {
					t.Fatal(err)
				}
				for _, s := range out.Shards {
					ids = append(ids, aws.ToString(s.ShardId))
					if s.SequenceNumberRange.EndingSequenceNumber != nil {
						t.Errorf("shard %s is closed", aws.ToString(s.ShardId))
					}
				}
				if out.NextToken == nil {
					break
				}
				in = &kinesis.ListShardsInput{NextToken: out.NextToken}
			}
			if len(ids) != 3 || ids[0] != ShardID(0) || ids[2] != ShardID(2) {
				t.Fatalf("ListShards: %v", ids)
			}
			if _, err := kc.DescribeStreamSummary(ctx, &kinesis.DescribeStreamSummaryInput{StreamName: aws.String("orders")}); err != nil {
				t.Fatal(err)
			}

			// TRIM_HORIZON, then GetRecords with a Limit, continued by
			// NextShardIterator to the end of the shard.
			it, err := kc.GetShardIterator(ctx, &kinesis.GetShardIteratorInput{StreamName: aws.String("orders"),
				ShardId: aws.String(ShardID(1)), ShardIteratorType: ktypes.ShardIteratorTypeTrimHorizon})
			if err != nil {
				t.Fatal(err)
			}
			iter := it.ShardIterator
			read := 0
			for read < ds.Records {
				out, err := kc.GetRecords(ctx, &kinesis.GetRecordsInput{ShardIterator: iter, Limit: aws.Int32(100)})
				if err != nil {
					t.Fatal(err)
				}
				if want := min(100, ds.Records-read); len(out.Records) != want {
					t.Fatalf("GetRecords at %d: %d records, want %d", read, len(out.Records), want)
				}
				checkRecords(t, ds, 1, read, out.Records)
				read += len(out.Records)
				if want := int64(ds.Records - read); aws.ToInt64(out.MillisBehindLatest) != want {
					t.Fatalf("MillisBehindLatest %d, want %d", aws.ToInt64(out.MillisBehindLatest), want)
				}
				iter = out.NextShardIterator
				if iter == nil {
					t.Fatal("no NextShardIterator on an open shard")
				}
			}
			// At the tip: empty, caught up, still an iterator.
			out, err := kc.GetRecords(ctx, &kinesis.GetRecordsInput{ShardIterator: iter})
			if err != nil || len(out.Records) != 0 || aws.ToInt64(out.MillisBehindLatest) != 0 || out.NextShardIterator == nil {
				t.Fatalf("GetRecords at the tip: %v, %+v", err, out)
			}

			// AT/AFTER_SEQUENCE_NUMBER and LATEST.
			for _, c := range []struct {
				typ  ktypes.ShardIteratorType
				seq  string
				want int
			}{
				{ktypes.ShardIteratorTypeAtSequenceNumber, Seq(2, 17), 17},
				{ktypes.ShardIteratorTypeAfterSequenceNumber, Seq(2, 17), 18},
				{ktypes.ShardIteratorTypeLatest, "", ds.Records},
			} {
				in := &kinesis.GetShardIteratorInput{StreamName: aws.String("orders"), ShardId: aws.String(ShardID(2)), ShardIteratorType: c.typ}
				if c.seq != "" {
					in.StartingSequenceNumber = aws.String(c.seq)
				}
				it, err := kc.GetShardIterator(ctx, in)
				if err != nil {
					t.Fatal(err)
				}
				out, err := kc.GetRecords(ctx, &kinesis.GetRecordsInput{ShardIterator: it.ShardIterator, Limit: aws.Int32(5)})
				if err != nil {
					t.Fatal(err)
				}
				if want := min(5, ds.Records-c.want); len(out.Records) != want {
					t.Fatalf("%s: %d records, want %d", c.typ, len(out.Records), want)
				}
				checkRecords(t, ds, 2, c.want, out.Records)
			}

			// Errors reach the SDK as typed errors.
			_, err = kc.GetShardIterator(ctx, &kinesis.GetShardIteratorInput{StreamName: aws.String("nope"),
				ShardId: aws.String(ShardID(0)), ShardIteratorType: ktypes.ShardIteratorTypeTrimHorizon})
			var nf *ktypes.ResourceNotFoundException
			if !errors.As(err, &nf) {
				t.Fatalf("unknown stream: %v, want ResourceNotFoundException", err)
			}
		})
	}
}

// TestResponseCap: one response carries at most 10 MiB of data.
func TestResponseCap(t *testing.T) {
	ds := NewDataset("big", 1, 12000, 2048, true)
	kc := startTestServer(t, ds)
	ctx := context.Background()
	it, err := kc.GetShardIterator(ctx, &kinesis.GetShardIteratorInput{StreamName: aws.String("big"),
		ShardId: aws.String(ShardID(0)), ShardIteratorType: ktypes.ShardIteratorTypeTrimHorizon})
	if err != nil {
		t.Fatal(err)
	}
	out, err := kc.GetRecords(ctx, &kinesis.GetRecordsInput{ShardIterator: it.ShardIterator})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(out.Records); n != maxResponseData/ds.DataLen {
		t.Fatalf("%d records, want %d", n, maxResponseData/ds.DataLen)
	}
	checkRecords(t, ds, 0, 0, out.Records[:10])
}

// TestServerCBOR: the server answers GetRecords in CBOR, eager and lazy,
// with the records it answers in JSON (CBORGetRecords decodes them, and
// never falls back to JSON).
func TestServerCBOR(t *testing.T) {
	for _, kind := range []string{"eager", "lazy", "msgpack"} {
		lazy := kind == "lazy"
		var ds *Dataset
		switch kind {
		case "msgpack":
			ds = NewMsgpackDataset("orders", 2, 300, 10240)
		default:
			ds = NewDataset("orders", 2, 300, map[bool]int{false: 0, true: 1024}[lazy], lazy)
		}
		kc := startTestServer(t, ds)
		ctx := context.Background()
		read := func(opt func(*kinesis.Options)) *kinesis.GetRecordsOutput {
			it, err := kc.GetShardIterator(ctx, &kinesis.GetShardIteratorInput{StreamName: aws.String("orders"),
				ShardId: aws.String(ShardID(1)), ShardIteratorType: ktypes.ShardIteratorTypeTrimHorizon})
			if err != nil {
				t.Fatal(err)
			}
			out, err := kc.GetRecords(ctx, &kinesis.GetRecordsInput{ShardIterator: it.ShardIterator, Limit: aws.Int32(120)}, opt)
			if err != nil {
				t.Fatal(err)
			}
			return out
		}
		fellBack := false
		got := read(kinesiswire.CBORGetRecords(func(string, error) { fellBack = true }))
		want := read(func(*kinesis.Options) {})
		if fellBack || len(got.Records) != 120 || aws.ToString(got.NextShardIterator) != aws.ToString(want.NextShardIterator) {
			t.Fatalf("%s: %d records in CBOR (fell back: %v), next %q want %q", kind, len(got.Records), fellBack, aws.ToString(got.NextShardIterator), aws.ToString(want.NextShardIterator))
		}
		checkRecords(t, ds, 1, 0, got.Records)
		checkRecords(t, ds, 1, 0, want.Records)
		if kind == "msgpack" && (ds.DataLen < 10000 || ds.DataLen > 10300) {
			t.Errorf("msgpack records of %d bytes, want about 10240", ds.DataLen)
		}
	}
}
