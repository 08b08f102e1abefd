package kinesiswire

// The transcoder of CBOR answers to AWS JSON 1.1 (cborToJSON), through which
// the SDK's own decoder reads an answer the fast decoder leaves to it.

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
)

// jsonNumber formats a float the way the SDK's JSON encoder would accept
// it back (shortest representation).
func jsonNumber(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }

// cborToJSON transcodes a Kinesis answer in CBOR to the JSON the same
// answer has in AWS JSON 1.1: byte strings become base64 text, and
// timestamps (tag 1, or GetRecords' ApproximateArrivalTimestamp) epoch
// seconds, read as decodeCBORGetRecords reads them.
func cborToJSON(p []byte) ([]byte, error) {
	r := cborReader{p: p}
	var b bytes.Buffer
	if err := transcode(&r, &b, false, 0); err != nil {
		return nil, err
	}
	if r.i != len(r.p) {
		return nil, errCBOR
	}
	return b.Bytes(), nil
}

// stampJSON writes the number at start as a timestamp in epoch seconds and
// reports whether it did (not for one out of any time's range: the number
// is written as it is, for the SDK to judge).
func stampJSON(r *cborReader, b *bytes.Buffer, start int) bool {
	end := r.i
	r.i = start
	t, err := r.timestamp()
	if err != nil {
		r.i = end
		return false
	}
	b.WriteString(jsonNumber(float64(t.UnixMilli()) / 1e3))
	return true
}

func transcode(r *cborReader, b *bytes.Buffer, stamp bool, depth int) error {
	if depth > 64 {
		return errCBOR
	}
	start := r.i
	m, ai, n, err := r.head()
	if err != nil {
		return err
	}
	switch m {
	case cborTag:
		return transcode(r, b, stamp || n == 1, depth+1)
	case cborUint, cborNegint:
		if stamp && stampJSON(r, b, start) {
			return nil
		}
		if m == cborUint {
			fmt.Fprintf(b, "%d", n)
		} else {
			fmt.Fprintf(b, "-%d", n+1)
		}
		return nil
	case cborBytes:
		v, err := r.str(m, n)
		if err != nil {
			return err
		}
		b.WriteByte('"')
		b.WriteString(base64.StdEncoding.EncodeToString(v))
		b.WriteByte('"')
		return nil
	case cborText:
		v, err := r.str(m, n)
		if err != nil {
			return err
		}
		q, _ := json.Marshal(string(v))
		b.Write(q)
		return nil
	case cborArray:
		b.WriteByte('[')
		for i := 0; r.more(n, i); i++ {
			if r.i >= len(r.p) {
				return errCBOR
			}
			if i > 0 {
				b.WriteByte(',')
			}
			if err := transcode(r, b, false, depth+1); err != nil {
				return err
			}
		}
		b.WriteByte(']')
		return nil
	case cborMap:
		b.WriteByte('{')
		for i := 0; r.more(n, i); i++ {
			if r.i >= len(r.p) {
				return errCBOR
			}
			if i > 0 {
				b.WriteByte(',')
			}
			ks := r.i
			k, err := r.text()
			if errors.Is(err, errShape) {
				// A key that is not text (no member the SDK knows): its
				// JSON, quoted.
				r.i = ks
				var kb bytes.Buffer
				if err := transcode(r, &kb, false, depth+1); err != nil {
					return err
				}
				k, err = kb.Bytes(), nil
			}
			if err != nil {
				return err
			}
			q, _ := json.Marshal(string(k))
			b.Write(q)
			b.WriteByte(':')
			if err := transcode(r, b, string(k) == "ApproximateArrivalTimestamp", depth+1); err != nil {
				return err
			}
		}
		b.WriteByte('}')
		return nil
	}
	// Major type 7: false, true, null, undefined, floats.
	switch {
	case ai == 20:
		b.WriteString("false")
	case ai == 21:
		b.WriteString("true")
	case ai == 22 || ai == 23:
		b.WriteString("null")
	case ai < 20 || (ai == 24 && n >= 32):
		b.WriteString("null") // an unassigned simple value: no JSON has one
	case ai >= 25 && ai <= 27:
		if stamp && stampJSON(r, b, start) {
			return nil
		}
		r.i = start
		v, _, err := r.number()
		if err != nil {
			return err
		}
		if v != v || v > 1e308 || v < -1e308 {
			return errCBOR // NaN and infinities have no JSON number
		}
		b.WriteString(jsonNumber(v))
	default:
		return errCBOR
	}
	return nil
}
