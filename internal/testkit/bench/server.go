package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"

	"github.com/kinesislease/kinesislease/internal/kinesiswire"
)

// Server is an in-process Kinesis endpoint serving one Dataset over the AWS
// JSON 1.1 protocol the SDK's Kinesis client speaks. Iterators are
// stateless ("<shard>/<position>"), so every client reads the same data
// from the start. It ignores signatures.
type Server struct {
	URL string
	ds  *Dataset
	srv *http.Server
	ln  net.Listener

	// Records and Bytes served by GetRecords (data bytes), Calls per op.
	Records, DataBytes, GetRecordsCalls, EmptyCalls atomic.Int64
	// LimitHist counts GetRecords calls by requested Limit: [0] < 10,
	// [1] < 100, [2] < 1,000, [3] < 10,000, [4] 10,000 or none.
	LimitHist [5]atomic.Int64
	// CPUNanos is the thread CPU time (user+sys) spent in the handler when
	// MeasureCPU is set: the server's own cost, to tell it from the
	// client's in the process' CPU time.
	CPUNanos   atomic.Int64
	MeasureCPU bool
	// ShardRecords and ShardCalls count GetRecords' records and calls per shard.
	ShardRecords, ShardCalls []atomic.Int64
}

// LimitSummary describes LimitHist.
func (s *Server) LimitSummary() string {
	return fmt.Sprintf("Limit <10:%d <100:%d <1k:%d <10k:%d 10k:%d", s.LimitHist[0].Load(), s.LimitHist[1].Load(),
		s.LimitHist[2].Load(), s.LimitHist[3].Load(), s.LimitHist[4].Load())
}

// maxResponseData is GetRecords' cap on the data of one response (10 MiB).
const maxResponseData = 10 << 20

// StartServer serves ds on a random 127.0.0.1 port.
func StartServer(ds *Dataset, measureCPU bool) (*Server, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s := &Server{URL: "http://" + ln.Addr().String(), ds: ds, ln: ln, MeasureCPU: measureCPU,
		ShardRecords: make([]atomic.Int64, ds.Shards), ShardCalls: make([]atomic.Int64, ds.Shards)}
	s.srv = &http.Server{Handler: s, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = s.srv.Serve(ln) }()
	return s, nil
}

// Close stops the server and closes its connections.
func (s *Server) Close() error { return s.srv.Close() }

func threadCPU() int64 {
	var ru syscall.Rusage
	// RUSAGE_THREAD (1): the calling thread only.
	if _, _, e := syscall.RawSyscall(syscall.SYS_GETRUSAGE, 1, uintptr(unsafe.Pointer(&ru)), 0); e != 0 {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}

type apiError struct {
	status int
	code   string
	msg    string
}

func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if s.MeasureCPU {
		// While locked, the goroutine runs on this thread only, so the
		// thread's CPU delta is the handler's (blocked time is not CPU).
		runtime.LockOSThread()
		t0 := threadCPU()
		defer func() {
			s.CPUNanos.Add(threadCPU() - t0)
			runtime.UnlockOSThread()
		}()
	}
	target := r.Header.Get("X-Amz-Target")
	op, ok := strings.CutPrefix(target, "Kinesis_20131202.")
	if r.Method != http.MethodPost || !ok {
		writeError(w, &apiError{400, "UnknownOperationException", "unknown target " + target})
		return
	}
	if kinesiswire.IsCBOR(r.Header.Get("Content-Type")) {
		// The library's default: GetRecords in CBOR, as AWS's Java SDK
		// sends it.
		body, err := io.ReadAll(r.Body)
		var in *kinesis.GetRecordsInput
		if err == nil {
			in, err = kinesiswire.DecodeGetRecordsInputCBOR(body)
		}
		if err != nil || op != "GetRecords" {
			writeCBORError(w, &apiError{400, "SerializationException", fmt.Sprintf("bench server: CBOR for GetRecords only (%s): %v", op, err)})
			return
		}
		var limit *int
		if in.Limit != nil {
			l := int(*in.Limit)
			limit = &l
		}
		if aerr := s.getRecords(w, aws.ToString(in.ShardIterator), limit, true); aerr != nil {
			writeCBORError(w, aerr)
		}
		return
	}
	var in struct {
		StreamName             string
		StreamARN              string
		ShardId                string
		ShardIteratorType      string
		StartingSequenceNumber string
		Timestamp              float64
		ShardIterator          string
		Limit                  *int
		NextToken              string
		MaxResults             *int
	}
	if err := json.NewDecoder(r.Body).Decode(&in); err != nil {
		writeError(w, &apiError{400, "SerializationException", err.Error()})
		return
	}
	var aerr *apiError
	switch op {
	case "ListShards":
		aerr = s.listShards(w, in.StreamName, in.StreamARN, in.NextToken, in.MaxResults)
	case "DescribeStreamSummary":
		aerr = s.describeStreamSummary(w, in.StreamName, in.StreamARN)
	case "GetShardIterator":
		aerr = s.getShardIterator(w, in.StreamName, in.StreamARN, in.ShardId, in.ShardIteratorType, in.StartingSequenceNumber, in.Timestamp)
	case "GetRecords":
		aerr = s.getRecords(w, in.ShardIterator, in.Limit, false)
	default:
		aerr = &apiError{400, "UnknownOperationException", "operation " + op + " is not supported by the bench server"}
	}
	if aerr != nil {
		writeError(w, aerr)
	}
}

func writeCBORError(w http.ResponseWriter, e *apiError) {
	w.Header().Set("Content-Type", kinesiswire.ContentTypeCBOR)
	w.Header().Set("X-Amzn-ErrorType", e.code)
	w.WriteHeader(e.status)
	_, _ = w.Write(kinesiswire.EncodeErrorCBOR(e.code, e.msg))
}

func writeError(w http.ResponseWriter, e *apiError) {
	w.Header().Set("Content-Type", "application/x-amz-json-1.1")
	w.Header().Set("X-Amzn-ErrorType", e.code)
	w.WriteHeader(e.status)
	b, _ := json.Marshal(map[string]string{"__type": e.code, "message": e.msg})
	_, _ = w.Write(b)
}

func writeJSON(w http.ResponseWriter, v any) {
	b, _ := json.Marshal(v)
	w.Header().Set("Content-Type", "application/x-amz-json-1.1")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	_, _ = w.Write(b)
}

func (s *Server) arn() string {
	return "arn:aws:kinesis:us-east-1:000000000000:stream/" + s.ds.Stream
}

func (s *Server) checkStream(name, arn string) *apiError {
	if (name == "" && arn == "") || (name != "" && name != s.ds.Stream) || (arn != "" && arn != s.arn()) {
		return &apiError{400, "ResourceNotFoundException", fmt.Sprintf("Stream %s%s under account 000000000000 not found.", name, arn)}
	}
	return nil
}

func (s *Server) listShards(w http.ResponseWriter, name, arn, next string, maxResults *int) *apiError {
	from := 0
	if next != "" {
		n, err := strconv.Atoi(strings.TrimPrefix(next, s.ds.Stream+"/"))
		if err != nil || n < 0 || n > s.ds.Shards {
			return &apiError{400, "InvalidArgumentException", "bad NextToken"}
		}
		from = n
	} else if err := s.checkStream(name, arn); err != nil {
		return err
	}
	limit := 1000
	if maxResults != nil {
		if *maxResults < 1 || *maxResults > 10000 {
			return &apiError{400, "InvalidArgumentException", "MaxResults must be in [1, 10000]"}
		}
		limit = *maxResults
	}
	type hashRange struct{ StartingHashKey, EndingHashKey string }
	type seqRange struct{ StartingSequenceNumber string }
	type shard struct {
		ShardId             string
		HashKeyRange        hashRange
		SequenceNumberRange seqRange
	}
	out := struct {
		Shards    []shard
		NextToken *string `json:",omitempty"`
	}{Shards: []shard{}}
	space := new(big.Int).Lsh(big.NewInt(1), 128)
	n := big.NewInt(int64(s.ds.Shards))
	to := min(from+limit, s.ds.Shards)
	for i := from; i < to; i++ {
		lo := new(big.Int).Div(new(big.Int).Mul(space, big.NewInt(int64(i))), n)
		hi := new(big.Int).Div(new(big.Int).Mul(space, big.NewInt(int64(i+1))), n)
		hi.Sub(hi, big.NewInt(1))
		out.Shards = append(out.Shards, shard{ShardID(i), hashRange{lo.String(), hi.String()}, seqRange{Seq(i, 0)}})
	}
	if to < s.ds.Shards {
		tok := fmt.Sprintf("%s/%d", s.ds.Stream, to)
		out.NextToken = &tok
	}
	writeJSON(w, out)
	return nil
}

func (s *Server) describeStreamSummary(w http.ResponseWriter, name, arn string) *apiError {
	if err := s.checkStream(name, arn); err != nil {
		return err
	}
	writeJSON(w, map[string]any{"StreamDescriptionSummary": map[string]any{
		"StreamName": s.ds.Stream, "StreamARN": s.arn(), "StreamStatus": "ACTIVE",
		"StreamModeDetails":       map[string]string{"StreamMode": "PROVISIONED"},
		"RetentionPeriodHours":    24,
		"StreamCreationTimestamp": float64(s.ds.Base.Unix() - 3600),
		"EnhancedMonitoring":      []any{},
		"EncryptionType":          "NONE",
		"OpenShardCount":          s.ds.Shards,
		"ConsumerCount":           0,
	}})
	return nil
}

func (s *Server) getShardIterator(w http.ResponseWriter, name, arn, shardID, typ, seq string, ts float64) *apiError {
	if err := s.checkStream(name, arn); err != nil {
		return err
	}
	sh, ok := parseShardID(shardID)
	if !ok || sh >= s.ds.Shards {
		return &apiError{400, "ResourceNotFoundException", fmt.Sprintf("Shard %s in stream %s under account 000000000000 does not exist", shardID, s.ds.Stream)}
	}
	var pos int
	switch typ {
	case "TRIM_HORIZON":
		pos = 0
	case "LATEST":
		pos = s.ds.Records
	case "AT_SEQUENCE_NUMBER", "AFTER_SEQUENCE_NUMBER":
		i, ok := parseSeq(sh, seq)
		if !ok {
			return &apiError{400, "InvalidArgumentException", fmt.Sprintf("StartingSequenceNumber %s used in GetShardIterator on shard %s in stream %s under account 000000000000 is invalid.", seq, shardID, s.ds.Stream)}
		}
		pos = i
		if typ == "AFTER_SEQUENCE_NUMBER" {
			pos++
		}
		pos = min(pos, s.ds.Records)
	case "AT_TIMESTAMP":
		ms := int64(ts*1000+0.5) - s.ds.Base.UnixMilli()
		pos = int(min(max(ms, 0), int64(s.ds.Records)))
	default:
		return &apiError{400, "InvalidArgumentException", "bad ShardIteratorType " + typ}
	}
	writeJSON(w, map[string]string{"ShardIterator": iterator(sh, pos)})
	return nil
}

func iterator(shard, pos int) string { return fmt.Sprintf("AAAA/%d/%d", shard, pos) }

func parseIterator(it string) (shard, pos int, ok bool) {
	rest, ok := strings.CutPrefix(it, "AAAA/")
	a, b, ok2 := strings.Cut(rest, "/")
	if !ok || !ok2 {
		return 0, 0, false
	}
	shard, err1 := strconv.Atoi(a)
	pos, err2 := strconv.Atoi(b)
	return shard, pos, err1 == nil && err2 == nil
}

func (s *Server) getRecords(w http.ResponseWriter, it string, limitp *int, cbor bool) *apiError {
	sh, pos, ok := parseIterator(it)
	if !ok || sh < 0 || sh >= s.ds.Shards || pos < 0 || pos > s.ds.Records {
		return &apiError{400, "InvalidArgumentException", "invalid ShardIterator"}
	}
	limit := 10000
	if limitp != nil {
		if *limitp < 1 || *limitp > 10000 {
			return &apiError{400, "InvalidArgumentException", "Limit must be in [1, 10000]"}
		}
		limit = *limitp
	}
	switch {
	case limit < 10:
		s.LimitHist[0].Add(1)
	case limit < 100:
		s.LimitHist[1].Add(1)
	case limit < 1000:
		s.LimitHist[2].Add(1)
	case limit < 10000:
		s.LimitHist[3].Add(1)
	default:
		s.LimitHist[4].Add(1)
	}
	end := min(pos+limit, s.ds.Records, pos+maxResponseData/s.ds.DataLen)
	s.GetRecordsCalls.Add(1)
	if end == pos {
		s.EmptyCalls.Add(1)
	}
	s.Records.Add(int64(end - pos))
	s.ShardRecords[sh].Add(int64(end - pos))
	s.ShardCalls[sh].Add(1)
	s.DataBytes.Add(int64(end-pos) * int64(s.ds.DataLen))

	if cbor {
		s.writeCBORRecords(w, sh, pos, end)
		return nil
	}
	w.Header().Set("Content-Type", "application/x-amz-json-1.1")
	if !s.ds.lazy {
		o := s.ds.offs[sh]
		body := int(o[end] - o[pos])
		if end > pos {
			body += end - pos - 1 // commas
		}
		tail := s.tail(nil, sh, end)
		w.Header().Set("Content-Length", strconv.Itoa(len(`{"Records":[`)+body+len(tail)))
		bw := bufio.NewWriterSize(w, 64<<10)
		_, _ = bw.WriteString(`{"Records":[`)
		frags := s.ds.frags[sh]
		for i := pos; i < end; i++ {
			if i > pos {
				_ = bw.WriteByte(',')
			}
			_, _ = bw.Write(frags[o[i]:o[i+1]])
		}
		_, _ = bw.Write(tail)
		_ = bw.Flush()
		return nil
	}
	// Lazy: generate into a chunk buffer and stream it (chunked encoding).
	buf := make([]byte, 0, 64<<10)
	buf = append(buf, `{"Records":[`...)
	for i := pos; i < end; i++ {
		if i > pos {
			buf = append(buf, ',')
		}
		buf = s.ds.appendFragment(buf, sh, i)
		if len(buf) > 60<<10 {
			if _, err := w.Write(buf); err != nil {
				return nil
			}
			buf = buf[:0]
		}
	}
	buf = s.tail(buf, sh, end)
	_, _ = w.Write(buf)
	return nil
}

// writeCBORRecords answers GetRecords in CBOR with records pos to end of
// shard sh.
func (s *Server) writeCBORRecords(w http.ResponseWriter, sh, pos, end int) {
	head := []byte{0xa3} // a map of 3
	head = cborText(head, "MillisBehindLatest")
	head = cborHead(head, 0, s.ds.Records-end)
	head = cborText(head, "NextShardIterator")
	head = cborText(head, iterator(sh, end))
	head = cborText(head, "Records")
	head = cborHead(head, 4, end-pos)
	w.Header().Set("Content-Type", kinesiswire.ContentTypeCBOR)
	if !s.ds.lazy {
		o := s.ds.coffs[sh]
		w.Header().Set("Content-Length", strconv.Itoa(len(head)+int(o[end]-o[pos])))
		bw := bufio.NewWriterSize(w, 64<<10)
		_, _ = bw.Write(head)
		_, _ = bw.Write(s.ds.cfrags[sh][o[pos]:o[end]])
		_ = bw.Flush()
		return
	}
	buf := append(make([]byte, 0, 64<<10), head...)
	for i := pos; i < end; i++ {
		buf = s.ds.genCBORFragment(buf, sh, i)
		if len(buf) > 60<<10 {
			if _, err := w.Write(buf); err != nil {
				return
			}
			buf = buf[:0]
		}
	}
	_, _ = w.Write(buf)
}

// tail closes a GetRecords response whose next record is end.
func (s *Server) tail(dst []byte, sh, end int) []byte {
	dst = append(dst, `],"MillisBehindLatest":`...)
	// Records arrive 1 ms apart: the tip is Records-end ms ahead.
	dst = strconv.AppendInt(dst, int64(s.ds.Records-end), 10)
	dst = append(dst, `,"NextShardIterator":"`...)
	dst = append(dst, iterator(sh, end)...)
	return append(dst, `"}`...)
}
