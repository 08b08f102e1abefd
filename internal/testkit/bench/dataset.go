package main

// The data set the server serves: Order, the record type, and Dataset, a
// fixed, deterministic stream whose records (data in JSON or MessagePack,
// their fragments of a GetRecords response in JSON or CBOR, encoded once or
// generated per request) are named by ShardID and Seq.

import (
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/kinesislease/kinesislease/codec"
	"github.com/kinesislease/kinesislease/internal/kinesiswire"
)

// Order is the record type of the data set: both the library's handler and
// the plain SDK loop decode each record's data into it.
type Order struct {
	ID       int64    `json:"id"`
	Customer string   `json:"customer"`
	Total    int64    `json:"total"`
	Items    []string `json:"items"`
	Note     string   `json:"note"`
}

// Dataset is a fixed, deterministic stream: Shards shards of Records records
// each. Record i of shard s has sequence number Seq(s, i), partition key
// "c-<n>", arrival time Base + i ms and JSON data of DataLen bytes.
//
// The data of every record is a fixed-length prefix (padded with JSON
// whitespace to a multiple of 3 bytes) holding the fields that vary, and a
// suffix (the "note" field, padding the record to the wanted size) shared
// by every record. Since base64 encodes 3-byte groups independently, a
// record's base64 is base64(prefix) followed by the shared base64(suffix):
// generating a record costs encoding the prefix only, whatever its size.
//
// A small data set (eager) holds each record's whole JSON fragment of the
// GetRecords response, encoded once; a large one (lazy) generates fragments
// per request, so that the server holds next to nothing.
type Dataset struct {
	Stream  string
	Shards  int
	Records int // per shard
	Base    time.Time
	DataLen int // bytes of each record's data (record 0's in MessagePack, whose integers vary in length)

	suffix64 []byte // base64 of the shared suffix
	suffix   []byte // the shared suffix
	lazy     bool
	msgpack  bool      // records in MessagePack (NewMsgpackDataset), not JSON
	frags    [][]byte  // eager: per shard, every fragment back to back
	offs     [][]int32 // eager: per shard, fragment i is frags[s][offs[s][i]:offs[s][i+1]]
	cfrags   [][]byte  // eager: the same in CBOR
	coffs    [][]int32
}

const prefixLen = 84 // a multiple of 3, enough for the varying fields (at most 82 bytes)

// NewDataset builds a data set of shards × records records whose data is
// about size bytes (at least about 100). lazy generates records per request.
func NewDataset(stream string, shards, records, size int, lazy bool) *Dataset {
	d := &Dataset{Stream: stream, Shards: shards, Records: records,
		Base: time.Unix(1_700_000_000, 0), lazy: lazy}
	noteLen := max(size-prefixLen-len(`"note":""}`), len("gift wrap"))
	note := "gift wrap" + strings.Repeat(".", noteLen-len("gift wrap"))
	suffix := `"note":"` + note + `"}`
	d.suffix64 = []byte(base64.StdEncoding.EncodeToString([]byte(suffix)))
	d.suffix = []byte(suffix)
	d.DataLen = prefixLen + len(suffix)
	if !lazy {
		d.frags, d.offs = d.fragments(d.genFragment)
		d.cfrags, d.coffs = d.fragments(d.genCBORFragment)
	}
	return d
}

// NewMsgpackDataset is NewDataset (eager) with each record's data the
// same Order in MessagePack (codec.Msgpack), its note padding it to about
// size bytes.
func NewMsgpackDataset(stream string, shards, records, size int) *Dataset {
	d := &Dataset{Stream: stream, Shards: shards, Records: records, Base: time.Unix(1_700_000_000, 0), msgpack: true}
	probe, _ := codec.Msgpack.Marshal(d.order(0, 0, ""))
	d.suffix = []byte(strings.Repeat(".", max(size-len(probe), len("gift wrap"))))
	d.DataLen = len(d.msgpackData(0, 0))
	d.frags, d.offs = d.fragments(d.genFragment)
	d.cfrags, d.coffs = d.fragments(d.genCBORFragment)
	return d
}

// order is record i of shard s as an Order with note.
func (d *Dataset) order(s, i int, note string) Order {
	return Order{ID: int64(s)*1_000_000_000 + int64(i), Customer: "c-" + strconv.Itoa(d.customer(s, i)), Total: int64(100 + (i*37)%100000),
		Items: []string{"sku-" + strconv.Itoa(i%500), "sku-" + strconv.Itoa((i*3)%500)}, Note: note}
}

// msgpackData is record i of shard s's data in a MessagePack data set.
func (d *Dataset) msgpackData(s, i int) []byte {
	b, err := codec.Msgpack.Marshal(d.order(s, i, string(d.suffix)))
	if err != nil {
		panic(err)
	}
	return b
}

// fragments encodes every record with gen: per shard, the fragments back
// to back and where each starts.
func (d *Dataset) fragments(gen func(dst []byte, s, i int) []byte) ([][]byte, [][]int32) {
	frags, offs := make([][]byte, d.Shards), make([][]int32, d.Shards)
	for s := range d.Shards {
		var buf []byte
		o := make([]int32, 0, d.Records+1)
		for i := range d.Records {
			o = append(o, int32(len(buf)))
			buf = gen(buf, s, i)
		}
		offs[s] = append(o, int32(len(buf)))
		frags[s] = buf
	}
	return frags, offs
}

// ShardID is shard s's id.
func ShardID(s int) string { return fmt.Sprintf("shardId-%012d", s) }

func parseShardID(id string) (int, bool) {
	n, ok := strings.CutPrefix(id, "shardId-")
	if !ok || len(n) != 12 {
		return 0, false
	}
	s, err := strconv.Atoi(n)
	return s, err == nil
}

// Seq is the sequence number of record i of shard s: 56 decimal digits, as
// Kinesis' are, increasing with i.
func Seq(s, i int) string { return fmt.Sprintf("4959%04d%048d", s, i) }

func appendSeq(dst []byte, s, i int) []byte {
	dst = append(dst, "4959"...)
	dst = appendPadded(dst, s, 4)
	return appendPadded(dst, i, 48)
}

func appendPadded(dst []byte, v, width int) []byte {
	var tmp [20]byte
	n := strconv.AppendInt(tmp[:0], int64(v), 10)
	for range width - len(n) {
		dst = append(dst, '0')
	}
	return append(dst, n...)
}

// parseSeq returns the record index of sequence number seq of shard s.
func parseSeq(s int, seq string) (int, bool) {
	if len(seq) != 56 || !strings.HasPrefix(seq, "4959") {
		return 0, false
	}
	if sh, err := strconv.Atoi(seq[4:8]); err != nil || sh != s {
		return 0, false
	}
	i, err := strconv.ParseInt(seq[8:], 10, 64)
	if err != nil || i < 0 {
		return 0, false
	}
	return int(i), true
}

// Data returns record i of shard s's data (for tests and checks).
func (d *Dataset) Data(s, i int) []byte {
	frag := d.genFragment(nil, s, i)
	start := strings.Index(string(frag), `"Data":"`) + len(`"Data":"`)
	end := start + strings.IndexByte(string(frag[start:]), '"')
	out, err := base64.StdEncoding.DecodeString(string(frag[start:end]))
	if err != nil {
		panic(err)
	}
	return out
}

// Arrival is record i's arrival time.
func (d *Dataset) Arrival(i int) time.Time { return d.Base.Add(time.Duration(i) * time.Millisecond) }

func (d *Dataset) customer(s, i int) int { return (i*7 + s*131) % 1000 }

// genFragment appends record i of shard s as a JSON object of GetRecords'
// Records array.
func (d *Dataset) genFragment(dst []byte, s, i int) []byte {
	var pre [prefixLen + 64]byte
	c := d.customer(s, i)
	ms := d.Base.UnixMilli() + int64(i)
	dst = append(dst, `{"ApproximateArrivalTimestamp":`...)
	dst = strconv.AppendInt(dst, ms/1000, 10)
	dst = append(dst, '.')
	dst = appendPadded(dst, int(ms%1000), 3)
	dst = append(dst, `,"Data":"`...)
	if d.msgpack {
		dst = base64.StdEncoding.AppendEncode(dst, d.msgpackData(s, i))
	} else {
		dst = base64.StdEncoding.AppendEncode(dst, d.prefix(pre[:0], s, i))
		dst = append(dst, d.suffix64...)
	}
	dst = append(dst, `","PartitionKey":"c-`...)
	dst = strconv.AppendInt(dst, int64(c), 10)
	dst = append(dst, `","SequenceNumber":"`...)
	dst = appendSeq(dst, s, i)
	return append(dst, `"}`...)
}

// genCBORFragment appends record i of shard s as a CBOR map of GetRecords'
// Records array, as Kinesis sends it in CBOR: data as a byte string, the
// arrival as tag 1 and epoch milliseconds.
func (d *Dataset) genCBORFragment(dst []byte, s, i int) []byte {
	var pre [prefixLen + 64]byte
	c := d.customer(s, i)
	dst = append(dst, 0xa4) // a map of 4
	dst = cborText(dst, "ApproximateArrivalTimestamp")
	dst = append(dst, 0xc1, 0x1b) // tag 1, a uint64
	dst = binary.BigEndian.AppendUint64(dst, uint64(d.Base.UnixMilli()+int64(i)))
	dst = cborText(dst, "Data")
	if d.msgpack {
		data := d.msgpackData(s, i)
		dst = cborHead(dst, 2, len(data))
		dst = append(dst, data...)
	} else {
		p := d.prefix(pre[:0], s, i)
		dst = cborHead(dst, 2, len(p)+len(d.suffix))
		dst = append(append(dst, p...), d.suffix...)
	}
	dst = cborText(dst, "PartitionKey")
	var key [16]byte
	k := strconv.AppendInt(append(key[:0], "c-"...), int64(c), 10)
	dst = cborHead(dst, 3, len(k))
	dst = append(dst, k...)
	dst = cborText(dst, "SequenceNumber")
	dst = cborHead(dst, 3, 56)
	return appendSeq(dst, s, i)
}

// cborHead appends a CBOR head of major type m with argument n.
func cborHead(dst []byte, m byte, n int) []byte { return kinesiswire.AppendCBORHead(dst, m, uint64(n)) }

func cborText(dst []byte, s string) []byte { return append(cborHead(dst, 3, len(s)), s...) }

// prefix appends the fields of record i of shard s that vary, padded to
// prefixLen.
func (d *Dataset) prefix(p []byte, s, i int) []byte {
	c := d.customer(s, i)
	p = append(p, `{"id":`...)
	p = strconv.AppendInt(p, int64(s)*1_000_000_000+int64(i), 10)
	p = append(p, `,"customer":"c-`...)
	p = strconv.AppendInt(p, int64(c), 10)
	p = append(p, `","total":`...)
	p = strconv.AppendInt(p, int64(100+(i*37)%100000), 10)
	p = append(p, `,"items":["sku-`...)
	p = strconv.AppendInt(p, int64(i%500), 10)
	p = append(p, `","sku-`...)
	p = strconv.AppendInt(p, int64((i*3)%500), 10)
	p = append(p, `"],`...)
	if len(p) > prefixLen {
		panic("bench: record prefix too long")
	}
	for len(p) < prefixLen {
		p = append(p, ' ')
	}
	return p
}

func (d *Dataset) appendFragment(dst []byte, s, i int) []byte {
	if d.lazy {
		return d.genFragment(dst, s, i)
	}
	o := d.offs[s]
	return append(dst, d.frags[s][o[i]:o[i+1]]...)
}
