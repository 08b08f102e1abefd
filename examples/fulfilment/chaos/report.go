// Reading the instances' report files: copied from ../demo/report.go (see the
// package comment on sharing it).

package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"
)

// delivery is one order handled by one instance: a line of its report.
type delivery struct {
	owner, shard, seq, id string
	at                    time.Time
}

// leaseEvent is a lease move an instance saw: a "#" line of its report.
type leaseEvent struct {
	owner, shard, kind string // kind: acquired, released, lost, ended
	at                 time.Time
}

// tail reads the lines appended to a report file since the last read.
type tail struct {
	path    string
	offset  int64
	partial []byte
}

// read returns the deliveries and events of the complete lines appended
// since the last call. A missing file has no lines yet.
func (t *tail) read() ([]delivery, []leaseEvent, error) {
	f, err := os.Open(t.path)
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
	var ds []delivery
	var es []leaseEvent
	for line := range strings.SplitSeq(string(data[:end]), "\n") {
		d, e, err := parseLine(line)
		if err != nil {
			return ds, es, fmt.Errorf("%s: %w", t.path, err)
		}
		if e != nil {
			es = append(es, *e)
		} else if d != nil {
			ds = append(ds, *d)
		}
	}
	return ds, es, nil
}

// parseLine parses "owner shard seq orderID unixnano" or
// "# owner shard kind unixnano".
func parseLine(line string) (*delivery, *leaseEvent, error) {
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
		return nil, &leaseEvent{owner: f[1], shard: f[2], kind: f[3], at: at}, nil
	}
	return &delivery{owner: f[0], shard: f[1], seq: f[2], id: f[3], at: at}, nil, nil
}

// cmpSeq compares two Kinesis sequence numbers (decimal strings of up to
// 128 bits, without leading zeros).
func cmpSeq(a, b string) int {
	if len(a) != len(b) {
		if len(a) < len(b) {
			return -1
		}
		return 1
	}
	return strings.Compare(a, b)
}

// shortShard turns shardId-000000000003 into 3.
func shortShard(id string) string {
	s := strings.TrimLeft(strings.TrimPrefix(id, "shardId-"), "0")
	if s == "" {
		return "0"
	}
	return s
}
