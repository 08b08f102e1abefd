package harness

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

// TestTail reads a report as an instance writes it: complete lines only, a
// partial line once it is complete, a missing file as empty.
func TestTail(t *testing.T) {
	path := filepath.Join(t.TempDir(), "i.report")
	tl := &Tail{Path: path}
	if ds, es, err := tl.Read(); len(ds)+len(es) != 0 || err != nil {
		t.Fatalf("missing file: %v %v %v", ds, es, err)
	}
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	write := func(s string) {
		t.Helper()
		if _, err := f.WriteString(s); err != nil {
			t.Fatal(err)
		}
	}
	write("# a shardId-000000000003 acquired 1000\na shardId-000000000003 49590 ord-1 2000\na shardId-0000")
	ds, es, err := tl.Read()
	if err != nil {
		t.Fatal(err)
	}
	wantE := LeaseEvent{Owner: "a", Shard: "shardId-000000000003", Kind: "acquired", At: time.Unix(0, 1000)}
	wantD := Delivery{Owner: "a", Shard: "shardId-000000000003", Seq: "49590", ID: "ord-1", At: time.Unix(0, 2000)}
	if len(es) != 1 || es[0] != wantE || len(ds) != 1 || ds[0] != wantD {
		t.Fatalf("first read: %v %v, want %v %v", ds, es, wantD, wantE)
	}
	write("00000003 49591 ord-2 3000\n\n")
	ds, es, err = tl.Read()
	if err != nil || len(es) != 0 || len(ds) != 1 || ds[0].ID != "ord-2" || ds[0].Shard != "shardId-000000000003" {
		t.Fatalf("second read: %v %v %v, want ord-2 on shardId-000000000003", ds, es, err)
	}
	write("a b c\n")
	if _, _, err := tl.Read(); err == nil || !strings.Contains(err.Error(), "malformed report line") {
		t.Errorf("malformed line: err %v", err)
	}
	if _, _, err := ParseLine("a s 1 o x"); err == nil || !strings.Contains(err.Error(), "malformed time") {
		t.Errorf("malformed time: err %v", err)
	}
}

func TestReportsRead(t *testing.T) {
	dir := t.TempDir()
	var ins []*Instance
	for i, lines := range []string{
		"a s0 1 o1 10\na s0 2 o2 20\n# a s0 lost 30\n",
		"b s0 2 o2 40\n",
	} {
		path := filepath.Join(dir, fmt.Sprint(i))
		if err := os.WriteFile(path, []byte(lines), 0o644); err != nil {
			t.Fatal(err)
		}
		ins = append(ins, &Instance{Tail: &Tail{Path: path}})
	}
	var r Reports
	if err := r.Read(ins); err != nil {
		t.Fatal(err)
	}
	if len(r.Deliveries) != 3 || len(r.Events) != 1 || len(r.Handled) != 2 || r.PerOwner["a"] != 2 || r.PerOwner["b"] != 1 {
		t.Errorf("reports: %+v", r)
	}
}

func TestCmpSeqShortShard(t *testing.T) {
	for _, c := range []struct {
		a, b string
		want int
	}{{"9", "10", -1}, {"10", "9", 1}, {"123", "123", 0}, {"124", "123", 1}, {"", "1", -1}} {
		if got := CmpSeq(c.a, c.b); got != c.want {
			t.Errorf("CmpSeq(%q, %q) = %d, want %d", c.a, c.b, got, c.want)
		}
	}
	if got := ShortList([]string{"shardId-000000000000", "shardId-000000000012"}); got != "[0 12]" {
		t.Errorf("ShortList: %q", got)
	}
}

func TestProgress(t *testing.T) {
	var b strings.Builder
	p := NewProgress(&b, time.Now().Add(-1500*time.Millisecond))
	p.Printf("held %d\n", 3)
	if got := b.String(); got != "   1.5s  held 3\n" {
		t.Errorf("progress line %q", got)
	}
	NewProgress(nil, time.Now()).Printf("discarded\n")
}

// TestWorkDir: done removes the directory, and a later run removes that of
// a run whose process is gone.
func TestWorkDir(t *testing.T) {
	prefix := fmt.Sprintf("harness-test-%d", time.Now().UnixNano())
	dir, done, err := WorkDir(prefix, false)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(filepath.Base(dir), fmt.Sprintf("%s-p%d-", prefix, os.Getpid())) {
		t.Errorf("dir %s", dir)
	}
	done()
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("%s not removed: %v", dir, err)
	}
	if runtime.GOOS == "windows" || !SignalsSupported {
		return
	}
	gone := exec.Command("true")
	if err := gone.Run(); err != nil {
		t.Skip(err)
	}
	stale := filepath.Join(os.TempDir(), fmt.Sprintf("%s-p%d-1", prefix, gone.Process.Pid))
	if err := os.Mkdir(stale, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(stale) })
	_, done, err = WorkDir(prefix, false)
	if err != nil {
		t.Fatal(err)
	}
	done()
	if _, err := os.Stat(stale); !os.IsNotExist(err) {
		t.Errorf("stale %s not removed: %v", stale, err)
	}
}
