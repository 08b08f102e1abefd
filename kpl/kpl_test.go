package kpl_test

import (
	"bytes"
	"crypto/md5"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/kinesislease/kinesislease/internal/testkit/leakcheck"
	"github.com/kinesislease/kinesislease/kpl"
)

func TestMain(m *testing.M) { leakcheck.Main(m) }

// repoRoot is the directory holding go.mod, above the working directory.
func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		up := filepath.Dir(dir)
		if up == dir {
			return "", errors.New("no go.mod above the working directory")
		}
		dir = up
	}
}

// runNode runs kpl/testdata/gen-vectors.js in mode with in (if not nil) as
// JSON on stdin, and decodes its JSON output into out.
func runNode(mode string, in, out any) error {
	root, err := repoRoot()
	if err != nil {
		return err
	}
	if _, err := exec.LookPath("node"); err != nil {
		return fmt.Errorf("node is not installed (%v): install Node.js 20, then run npm ci at the repo root (%s) to install aws-kinesis-agg", err, root)
	}
	cmd := exec.Command("node", filepath.Join("kpl", "testdata", "gen-vectors.js"), mode)
	cmd.Dir = root
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return err
		}
		cmd.Stdin = bytes.NewReader(b)
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		var exit *exec.ExitError
		if errors.As(err, &exit) && exit.ExitCode() == 3 {
			return fmt.Errorf("aws-kinesis-agg is missing: run npm ci at the repo root (%s): %s", root, strings.TrimSpace(stderr.String()))
		}
		return fmt.Errorf("node gen-vectors.js %s: %v\n%s", mode, err, stderr.String())
	}
	if err := json.Unmarshal(stdout.Bytes(), out); err != nil {
		return fmt.Errorf("node gen-vectors.js %s: output: %v", mode, err)
	}
	return nil
}

// node is runNode failing t on an error.
func node(t testing.TB, mode string, in, out any) {
	t.Helper()
	if err := runNode(mode, in, out); err != nil {
		t.Fatalf("%v", err)
	}
}

// jsRecord is a user record as the script reads and writes it.
type jsRecord struct {
	PartitionKey    string `json:"partitionKey"`
	ExplicitHashKey string `json:"explicitHashKey,omitempty"`
	Data            []byte `json:"data"` // base64
}

// loadVectors runs the script's vectors mode once per test binary.
var loadVectors = sync.OnceValues(func() ([]vector, error) {
	var vs []vector
	return vs, runNode("vectors", nil, &vs)
})

func referenceVectors(t testing.TB) []vector {
	t.Helper()
	vs, err := loadVectors()
	if err != nil {
		t.Fatalf("%v", err)
	}
	return vs
}

type vector struct {
	Name       string     `json:"name"`
	Aggregates [][]byte   `json:"aggregates"`
	Records    []jsRecord `json:"records"`
}

func toUser(rs []jsRecord) []kpl.UserRecord {
	out := make([]kpl.UserRecord, len(rs))
	for i, r := range rs {
		out[i] = kpl.UserRecord{PartitionKey: r.PartitionKey, ExplicitHashKey: r.ExplicitHashKey, Data: r.Data}
	}
	return out
}

func sameRecords(t testing.TB, what string, got, want []kpl.UserRecord) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d user records, want %d", what, len(got), len(want))
	}
	for i := range got {
		g, w := got[i], want[i]
		if g.PartitionKey != w.PartitionKey || g.ExplicitHashKey != w.ExplicitHashKey || !bytes.Equal(g.Data, w.Data) || g.Data == nil {
			t.Fatalf("%s: record %d = {pk %q ehk %q data %d bytes %x}, want {pk %q ehk %q data %d bytes %x}", what, i,
				g.PartitionKey, g.ExplicitHashKey, len(g.Data), head(g.Data), w.PartitionKey, w.ExplicitHashKey, len(w.Data), head(w.Data))
		}
	}
}

func head(b []byte) []byte { return b[:min(len(b), 16)] }

// TestSplitReferenceVectors: kpl.Split returns exactly the user records
// aws-kinesis-agg aggregated.
func TestSplitReferenceVectors(t *testing.T) {
	vectors := referenceVectors(t)
	if len(vectors) < 8 {
		t.Fatalf("%d vectors, want at least 8", len(vectors))
	}
	for _, v := range vectors {
		t.Run(v.Name, func(t *testing.T) {
			var got []kpl.UserRecord
			for i, a := range v.Aggregates {
				if !kpl.IsAggregated(a) {
					t.Fatalf("aggregate %d (%d bytes): IsAggregated false", i, len(a))
				}
				if len(a) > 1<<20 {
					t.Fatalf("aggregate %d: %d bytes, over Kinesis' 1 MiB", i, len(a))
				}
				recs, err := kpl.Split(a)
				if err != nil {
					t.Fatalf("aggregate %d: %v", i, err)
				}
				got = append(got, recs...)
			}
			sameRecords(t, "Split", got, toUser(v.Records))
		})
	}
}

// goSets are user record sets aggregated by kpl.Aggregate. Integer-like
// keys are fine here: aws-kinesis-agg's de-aggregator reads the key tables
// in order (only its aggregator reorders them).
func goSets() map[string][]kpl.UserRecord {
	sets := map[string][]kpl.UserRecord{
		"one":   {{PartitionKey: "k", Data: []byte("v")}},
		"empty": {{PartitionKey: "k", Data: []byte{}}, {PartitionKey: "k2", Data: []byte{}}},
		"integer-like keys": {
			{PartitionKey: "10", ExplicitHashKey: "7", Data: []byte("a")},
			{PartitionKey: "2", ExplicitHashKey: "3", Data: []byte("b")},
			{PartitionKey: "10", Data: []byte("c")},
		},
		"unicode and ehk": {
			{PartitionKey: "日本語", ExplicitHashKey: "340282366920938463463374607431768211455", Data: []byte{0, 1, 2}},
			{PartitionKey: "🦄", Data: []byte("\xff\xfe")},
			{PartitionKey: "日本語", Data: kpl.Magic},
		},
	}
	var many []kpl.UserRecord
	for i := range 2000 {
		many = append(many, kpl.UserRecord{PartitionKey: fmt.Sprintf("key-%d", i%101), Data: bytes.Repeat([]byte{byte(i)}, i%300)})
	}
	sets["many"] = many
	return sets
}

// TestAggregateReadByReference: aws-kinesis-agg's deaggregateSync splits
// kpl.Aggregate's output into the same user records, and so does Split.
func TestAggregateReadByReference(t *testing.T) {
	vectors := referenceVectors(t)
	sets := goSets()
	for _, v := range vectors {
		sets["reference: "+v.Name] = toUser(v.Records)
	}
	names := slices.Sorted(func(yield func(string) bool) {
		for n := range sets {
			if !yield(n) {
				return
			}
		}
	})
	blobs := make([][]byte, len(names))
	for i, n := range names {
		blobs[i] = kpl.Aggregate(sets[n])
	}
	var results []struct {
		Records       []jsRecord `json:"records"`
		Error         string     `json:"error"`
		NotAggregated bool       `json:"notAggregated"`
	}
	node(t, "deaggregate", blobs, &results)
	if len(results) != len(names) {
		t.Fatalf("%d results for %d aggregates", len(results), len(names))
	}
	for i, n := range names {
		r := results[i]
		if r.Error != "" || r.NotAggregated {
			t.Fatalf("%s: aws-kinesis-agg: error %q, not aggregated %v", n, r.Error, r.NotAggregated)
		}
		sameRecords(t, n+": deaggregateSync", toUser(r.Records), sets[n])
		own, err := kpl.Split(blobs[i])
		if err != nil {
			t.Fatalf("%s: Split(Aggregate): %v", n, err)
		}
		sameRecords(t, n+": Split", own, sets[n])
	}
}

// wrap makes an aggregated record of a protobuf body, with a good checksum.
func wrap(body []byte) []byte {
	sum := md5.Sum(body)
	return slices.Concat(kpl.Magic, body, sum[:])
}

// userRec encodes one Record message.
func userRec(pk uint64, ehk *uint64, data []byte) []byte {
	var r []byte
	r = protowire.AppendTag(r, 1, protowire.VarintType)
	r = protowire.AppendVarint(r, pk)
	if ehk != nil {
		r = protowire.AppendTag(r, 2, protowire.VarintType)
		r = protowire.AppendVarint(r, *ehk)
	}
	if data != nil {
		r = protowire.AppendTag(r, 3, protowire.BytesType)
		r = protowire.AppendBytes(r, data)
	}
	return r
}

func field(num protowire.Number, v []byte) []byte {
	b := protowire.AppendTag(nil, num, protowire.BytesType)
	return protowire.AppendBytes(b, v)
}

func TestSplitCorrupt(t *testing.T) {
	good := kpl.Aggregate([]kpl.UserRecord{
		{PartitionKey: "a", Data: []byte("one")},
		{PartitionKey: "b", ExplicitHashKey: "123456789012345678901234567890", Data: []byte("two")},
	})
	body := good[len(kpl.Magic) : len(good)-md5.Size]
	badMD5 := bytes.Clone(good)
	badMD5[len(badMD5)-1] ^= 1
	badBody := bytes.Clone(good)
	badBody[len(kpl.Magic)+3] ^= 0x20 // a data byte: the checksum no longer matches
	one, two := uint64(1), uint64(0)
	cases := map[string][]byte{
		"bad MD5":                     badMD5,
		"body changed":                badBody,
		"truncated":                   good[:len(good)-5],
		"truncated to magic+1":        good[:len(kpl.Magic)+1],
		"magic only":                  bytes.Clone(kpl.Magic),
		"magic and 15 bytes":          slices.Concat(kpl.Magic, make([]byte, 15)),
		"magic and a zero checksum":   slices.Concat(kpl.Magic, make([]byte, 16)),
		"empty body, good checksum":   wrap(nil),
		"protobuf truncated mid-body": wrap(body[:len(body)-2]),
		"protobuf bad varint":         wrap([]byte{0x0a, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}),
		"protobuf length past end":    wrap([]byte{0x0a, 0x40, 'a'}),
		"protobuf bad wire type":      wrap([]byte{0x0f, 0x00}),
		"protobuf field number 0":     wrap([]byte{0x02, 0x00}),
		"protobuf garbage":            wrap([]byte("\xff\xff\xff\xff garbage")),
		"record garbage":              wrap(slices.Concat(field(1, []byte("a")), field(3, []byte{0xff, 0xff}))),
		"record without data":         wrap(slices.Concat(field(1, []byte("a")), field(3, userRec(0, nil, nil)))),
		"record without key index":    wrap(slices.Concat(field(1, []byte("a")), field(3, field(3, []byte("x"))))),
		"key index out of range":      wrap(slices.Concat(field(1, []byte("a")), field(3, userRec(1, nil, []byte("x"))))),
		"huge key index":              wrap(slices.Concat(field(1, []byte("a")), field(3, userRec(1<<63, nil, []byte("x"))))),
		"no key table":                wrap(field(3, userRec(0, nil, []byte("x")))),
		"hash key index out of range": wrap(slices.Concat(field(1, []byte("a")), field(2, []byte("9")), field(3, userRec(0, &one, []byte("x"))))),
		"no hash key table":           wrap(slices.Concat(field(1, []byte("a")), field(3, userRec(0, &two, []byte("x"))))),
		"tables but no records":       wrap(slices.Concat(field(1, []byte("a")), field(2, []byte("9")))),
	}
	for name, data := range cases {
		t.Run(name, func(t *testing.T) {
			recs, err := kpl.Split(data)
			if !errors.Is(err, kpl.ErrCorrupt) || recs != nil {
				t.Fatalf("Split = %d records, %v; want nil, ErrCorrupt", len(recs), err)
			}
		})
	}
	// The reference agrees on the checksum cases.
	var results []struct {
		Error string `json:"error"`
	}
	node(t, "deaggregate", [][]byte{badMD5, badBody}, &results)
	for i, r := range results {
		if r.Error == "" {
			t.Errorf("aws-kinesis-agg accepted corrupt case %d", i)
		}
	}
}

func TestSplitNotAggregated(t *testing.T) {
	for _, data := range [][]byte{
		nil, {}, []byte("hello"), []byte(`{"id":1}`), kpl.Magic[:3],
		slices.Concat([]byte{0xF3, 0x89, 0x9A, 0xC3}, make([]byte, 40)), // last magic byte off
		slices.Concat([]byte{0x00}, kpl.Aggregate([]kpl.UserRecord{{PartitionKey: "a", Data: []byte("b")}})),
	} {
		recs, err := kpl.Split(data)
		if recs != nil || err != nil {
			t.Errorf("Split(%q) = %v, %v; want nil, nil", data, recs, err)
		}
		if kpl.IsAggregated(data) {
			t.Errorf("IsAggregated(%q) = true", data)
		}
	}
}

// TestSplitSkipsUnknownFields: tags (Record field 4) and unknown fields, as
// newer producers may write, are skipped.
func TestSplitSkipsUnknownFields(t *testing.T) {
	tag := slices.Concat(field(1, []byte("k")), field(2, []byte("v")))
	rec := slices.Concat(userRec(0, nil, []byte("x")), field(4, tag), protowire.AppendVarint([]byte{0x48}, 5)) // 0x48: field 9 varint
	body := slices.Concat(field(1, []byte("pk")), protowire.AppendVarint([]byte{0x50}, 1), field(3, rec), field(7, []byte("future")))
	recs, err := kpl.Split(wrap(body))
	if err != nil {
		t.Fatal(err)
	}
	sameRecords(t, "Split", recs, []kpl.UserRecord{{PartitionKey: "pk", Data: []byte("x")}})
}

// TestSplitAliases: user records' Data are sub-slices of the aggregate.
func TestSplitAliases(t *testing.T) {
	data := kpl.Aggregate([]kpl.UserRecord{{PartitionKey: "a", Data: []byte("payload")}})
	recs, err := kpl.Split(data)
	if err != nil || len(recs) != 1 {
		t.Fatal(recs, err)
	}
	i := bytes.Index(data, []byte("payload"))
	if &recs[0].Data[0] != &data[i] {
		t.Fatal("Data is a copy, want a sub-slice of the aggregate")
	}
}

// FuzzSplit: Split never panics; what it returns is all or nothing, and
// aggregating the records it returns splits into the same records. The
// input is tried both as is and as the body of an aggregate with a good
// checksum, so the fuzzer reaches the protobuf parser.
func FuzzSplit(f *testing.F) {
	for _, set := range goSets() {
		a := kpl.Aggregate(set)
		if len(a) < 64<<10 {
			f.Add(a)
			f.Add(a[len(kpl.Magic) : len(a)-md5.Size])
		}
	}
	f.Add([]byte{})
	f.Add(bytes.Clone(kpl.Magic))
	f.Add(slices.Concat(field(1, []byte("a")), field(3, userRec(1, nil, []byte("x")))))
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, in := range [][]byte{data, wrap(data)} {
			recs, err := kpl.Split(in)
			switch {
			case err != nil:
				if !errors.Is(err, kpl.ErrCorrupt) || recs != nil {
					t.Fatalf("Split = %d records, %v: want nil and ErrCorrupt", len(recs), err)
				}
				continue
			case recs == nil:
				if bytes.HasPrefix(in, kpl.Magic) {
					t.Fatalf("Split of data with the magic = nil, nil")
				}
				continue
			case len(recs) == 0:
				t.Fatalf("Split = empty non-nil slice")
			}
			again, err := kpl.Split(kpl.Aggregate(recs))
			if err != nil {
				t.Fatalf("Split(Aggregate(Split(x))): %v", err)
			}
			sameRecords(t, "re-aggregated", again, recs)
		}
	})
}

// BenchmarkSplit measures de-aggregation throughput: user records and
// aggregate megabytes per second.
func BenchmarkSplit(b *testing.B) {
	for _, c := range []struct {
		records, size int
	}{{1, 1000}, {100, 100}, {500, 1000}, {9000, 100}, {1000, 1000}} {
		var set []kpl.UserRecord
		for i := range c.records {
			set = append(set, kpl.UserRecord{
				PartitionKey: fmt.Sprintf("customer-%d", i%64),
				Data:         bytes.Repeat([]byte{byte(i)}, c.size),
			})
		}
		data := kpl.Aggregate(set)
		b.Run(fmt.Sprintf("%dx%dB", c.records, c.size), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				recs, err := kpl.Split(data)
				if err != nil || len(recs) != c.records {
					b.Fatal(len(recs), err)
				}
			}
			s := b.Elapsed().Seconds()
			b.ReportMetric(float64(b.N*c.records)/s, "records/s")
			b.ReportMetric(float64(b.N*len(data))/s/1e6, "MB/s")
		})
	}
}
