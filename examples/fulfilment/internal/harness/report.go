package harness

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"
)

// Delivery is one order handled by one instance: a line of its report.
type Delivery struct {
	Owner, Shard, Seq, ID string
	At                    time.Time
}

// LeaseEvent is a lease move an instance saw: a "#" line of its report.
type LeaseEvent struct {
	Owner, Shard, Kind string // Kind: acquired, released, lost, ended
	At                 time.Time
}

// Tail reads the lines appended to a report file since the last read.
type Tail struct {
	Path    string
	offset  int64
	partial []byte
}

// Read returns the deliveries and events of the complete lines appended
// since the last call. A missing file has no lines yet.
func (t *Tail) Read() ([]Delivery, []LeaseEvent, error) {
	f, err := os.Open(t.Path)
	if os.IsNotExist(err) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	if _, err := f.Seek(t.offset, io.SeekStart); err != nil {
		return nil, nil, err
	}
	data, err := io.ReadAll(f)
	if err != nil {
		return nil, nil, err
	}
	t.offset += int64(len(data))
	data = append(t.partial, data...)
	end := bytes.LastIndexByte(data, '\n')
	if end < 0 {
		t.partial = data
		return nil, nil, nil
	}
	t.partial = append([]byte(nil), data[end+1:]...)
	var ds []Delivery
	var es []LeaseEvent
	for line := range strings.SplitSeq(string(data[:end]), "\n") {
		d, e, err := ParseLine(line)
		if err != nil {
			return ds, es, fmt.Errorf("%s: %w", t.Path, err)
		}
		if e != nil {
			es = append(es, *e)
		} else if d != nil {
			ds = append(ds, *d)
		}
	}
	return ds, es, nil
}

// ParseLine parses a report line, "owner shard seq orderID unixnano" or
// "# owner shard kind unixnano"; a blank line is neither.
func ParseLine(line string) (*Delivery, *LeaseEvent, error) {
	f := strings.Fields(line)
	if len(f) == 0 {
		return nil, nil, nil
	}
	if len(f) != 5 {
		return nil, nil, fmt.Errorf("malformed report line %q", line)
	}
	ns, err := strconv.ParseInt(f[4], 10, 64)
	if err != nil {
		return nil, nil, fmt.Errorf("malformed time in report line %q", line)
	}
	at := time.Unix(0, ns)
	if f[0] == "#" {
		return nil, &LeaseEvent{Owner: f[1], Shard: f[2], Kind: f[3], At: at}, nil
	}
	return &Delivery{Owner: f[0], Shard: f[1], Seq: f[2], ID: f[3], At: at}, nil, nil
}

// Reports is what the instances' reports said so far. Its user serialises
// the calls.
type Reports struct {
	Deliveries []Delivery
	Events     []LeaseEvent
	Handled    map[string]bool // distinct order ids
	PerOwner   map[string]int  // deliveries per owner
}

// Read reads what the reports of ins gained since the last read.
func (r *Reports) Read(ins []*Instance) error {
	if r.Handled == nil {
		r.Handled, r.PerOwner = map[string]bool{}, map[string]int{}
	}
	var errs []error
	for _, in := range ins {
		ds, es, err := in.Tail.Read()
		errs = append(errs, err)
		r.Deliveries = append(r.Deliveries, ds...)
		r.Events = append(r.Events, es...)
		for _, d := range ds {
			r.Handled[d.ID] = true
			r.PerOwner[d.Owner]++
		}
	}
	return errors.Join(errs...)
}

// CmpSeq compares two Kinesis sequence numbers (decimal strings of up to
// 128 bits, without leading zeros).
func CmpSeq(a, b string) int {
	if len(a) != len(b) {
		if len(a) < len(b) {
			return -1
		}
		return 1
	}
	return strings.Compare(a, b)
}

// ShortShard turns shardId-000000000003 into 3.
func ShortShard(id string) string {
	s := strings.TrimLeft(strings.TrimPrefix(id, "shardId-"), "0")
	if s == "" {
		return "0"
	}
	return s
}

// ShortList turns shard ids into "[0 3 5]".
func ShortList(ids []string) string {
	s := make([]string, len(ids))
	for i, id := range ids {
		s[i] = ShortShard(id)
	}
	return "[" + strings.Join(s, " ") + "]"
}
