package kinesiswire

// CBOR as Kinesis speaks it (application/x-amz-cbor-1.1): the operations and
// shapes of AWS JSON 1.1, the body in CBOR (RFC 8949). AWS's Java SDK v2
// talks to Kinesis this way by default (the Kinesis model's
// customization.config sets the protocol to "cbor"; AwsCborProtocolFactory
// sends Content-Type application/x-amz-cbor-1.1 and the same X-Amz-Target
// as JSON), and so does the KCL, which uses that SDK. What differs from
// JSON, as that SDK encodes and decodes it:
//   - blobs (a record's Data) are byte strings, not base64 text (a text
//     string is taken as base64, as the SDK's unmarshaller does);
//   - timestamps are integers of epoch milliseconds, tag 1 optional
//     (SdkCborGenerator writes tag 1 and toEpochMilli; the CBOR protocol's
//     default timestamp format is UNIX_TIMESTAMP_MILLIS);
//   - errors: the code in the x-amzn-ErrorType header, else __type (or
//     code) in the body; the message in x-amzn-error-message, else message,
//     Message or errorMessage.
// Emulators differ: kinesalite sends timestamps as floats of epoch seconds,
// so a float is taken as seconds, and so is a positive integer below 1e11
// (a millisecond count that small is 1973, before any Kinesis record; an
// arrival read as 1970 would make a record look decades old).

import (
	"encoding/base64"
	"encoding/binary"
	"errors"
	"math"
	"time"
	"unicode/utf8"
)

// cborMajor is a CBOR major type (the top three bits of an item's head).
type cborMajor byte

const (
	cborUint cborMajor = iota
	cborNegint
	cborBytes
	cborText
	cborArray
	cborMap
	cborTag
	cborSimple
)

// cborIndefinite is an argument of an indefinite-length string, array or
// map (additional information 31).
const cborIndefinite = math.MaxUint64

var (
	errCBOR  = errors.New("kinesiswire: malformed CBOR")
	errShape = errors.New("kinesiswire: CBOR item of another type than the member's")
)

// cborReader reads CBOR items from p.
type cborReader struct {
	p []byte
	i int
}

// head reads an item's head: its major type, additional information and
// argument (cborIndefinite for an indefinite length; for major type 7, the
// argument holds a float's bits or a simple value).
func (r *cborReader) head() (cborMajor, byte, uint64, error) {
	if r.i >= len(r.p) {
		return 0, 0, 0, errCBOR
	}
	b := r.p[r.i]
	r.i++
	m, ai := cborMajor(b>>5), b&0x1f
	switch {
	case ai < 24:
		return m, ai, uint64(ai), nil
	case ai <= 27:
		// 1, 2, 4 or 8 bytes of argument, big-endian.
		n := 1 << (ai - 24)
		if r.i+n > len(r.p) {
			return 0, 0, 0, errCBOR
		}
		var v uint64
		for _, c := range r.p[r.i : r.i+n] {
			v = v<<8 | uint64(c)
		}
		r.i += n
		return m, ai, v, nil
	case ai == 31 && (m == cborBytes || m == cborText || m == cborArray || m == cborMap || m == cborSimple):
		return m, ai, cborIndefinite, nil
	}
	return 0, 0, 0, errCBOR
}

// isBreak reports whether the next byte ends an indefinite-length item,
// and consumes it if so.
func (r *cborReader) isBreak() bool {
	if r.i < len(r.p) && r.p[r.i] == 0xff {
		r.i++
		return true
	}
	return false
}

// str reads a text or byte string of major type m whose head was read, with
// argument n. A definite string is a slice of p (no copy); an indefinite
// one's chunks are joined into a new slice.
func (r *cborReader) str(m cborMajor, n uint64) ([]byte, error) {
	if n != cborIndefinite {
		if n > uint64(len(r.p)-r.i) {
			return nil, errCBOR
		}
		v := r.p[r.i : r.i+int(n)]
		r.i += int(n)
		if m == cborText && !utf8.Valid(v) {
			return nil, errCBOR
		}
		return v, nil
	}
	var out []byte
	for !r.isBreak() {
		cm, _, cn, err := r.head()
		if err != nil || cm != m || cn == cborIndefinite {
			return nil, errCBOR
		}
		v, err := r.str(m, cn)
		if err != nil {
			return nil, err
		}
		out = append(out, v...)
	}
	if out == nil {
		out = []byte{}
	}
	return out, nil
}

// text reads a text string (after any tags).
func (r *cborReader) text() ([]byte, error) {
	m, _, n, err := r.untagged()
	switch {
	case err != nil:
		return nil, err
	case m != cborText:
		return nil, r.wrong(m, n)
	}
	return r.str(m, n)
}

// untagged reads an item's head, skipping any tags before it.
func (r *cborReader) untagged() (cborMajor, byte, uint64, error) {
	for {
		m, ai, n, err := r.head()
		if err != nil || m != cborTag {
			return m, ai, n, err
		}
	}
}

// isNull reports whether the next item is null or undefined, and consumes
// it if so.
func (r *cborReader) isNull() bool {
	if r.i < len(r.p) && (r.p[r.i] == 0xf6 || r.p[r.i] == 0xf7) {
		r.i++
		return true
	}
	return false
}

// skip reads one whole item and drops it (depth bounds the nesting).
func (r *cborReader) skip(depth int) error {
	if depth > 64 {
		return errCBOR
	}
	m, ai, n, err := r.head()
	if err != nil {
		return err
	}
	switch m {
	case cborUint, cborNegint:
		return nil
	case cborBytes, cborText:
		_, err := r.str(m, n)
		return err
	case cborArray, cborMap:
		per := 1
		if m == cborMap {
			per = 2
		}
		if n == cborIndefinite {
			for !r.isBreak() {
				for range per {
					if err := r.skip(depth + 1); err != nil {
						return err
					}
				}
			}
			return nil
		}
		if n > uint64(len(r.p)-r.i) { // every item takes a byte at least
			return errCBOR
		}
		for range int(n) * per {
			if err := r.skip(depth + 1); err != nil {
				return err
			}
		}
		return nil
	case cborTag:
		return r.skip(depth + 1)
	default: // simple values and floats: the head is the whole item
		if n == cborIndefinite || (ai == 24 && n < 32) {
			return errCBOR // a lone break; a two-byte simple value below 32 is not well-formed
		}
		return nil
	}
}

// container reads the head of a map or an array (after any tags) and
// returns its length (cborIndefinite for an indefinite one).
func (r *cborReader) container(want cborMajor) (uint64, error) {
	m, _, n, err := r.untagged()
	switch {
	case err != nil:
		return 0, err
	case m != want:
		return 0, r.wrong(m, n)
	}
	if n != cborIndefinite && n > uint64(len(r.p)-r.i) {
		return 0, errCBOR
	}
	return n, nil
}

// more reports whether a container of length n, of which i items were
// read, has another (consuming the break of an indefinite one).
func (r *cborReader) more(n uint64, i int) bool {
	if n == cborIndefinite {
		return !r.isBreak()
	}
	return uint64(i) < n
}

// number reads an integer or a float (after any tags) as a float64, and
// reports whether it was an integer.
func (r *cborReader) number() (v float64, integer bool, err error) {
	m, ai, n, err := r.untagged()
	if err != nil {
		return 0, false, err
	}
	switch {
	case m == cborUint:
		return float64(n), true, nil
	case m == cborNegint:
		return -1 - float64(n), true, nil
	case m == cborSimple && ai == 25:
		return float16(uint16(n)), false, nil
	case m == cborSimple && ai == 26:
		return float64(math.Float32frombits(uint32(n))), false, nil
	case m == cborSimple && ai == 27:
		return math.Float64frombits(n), false, nil
	}
	return 0, false, r.wrong(m, n)
}

// integer reads an integer (after any tags) that fits an int64.
func (r *cborReader) integer() (int64, error) {
	m, _, n, err := r.untagged()
	switch {
	case err != nil:
		return 0, err
	case m == cborUint && n <= math.MaxInt64:
		return int64(n), nil
	case m == cborNegint && n <= math.MaxInt64:
		return -1 - int64(n), nil
	case m == cborUint || m == cborNegint:
		return 0, errShape // out of int64's range
	}
	return 0, r.wrong(m, n)
}

// timestamp reads a timestamp as the SDK's CBOR protocol decodes one: an
// integer of epoch milliseconds (see the top of this file for floats and
// small integers), truncated to the millisecond, in UTC.
func (r *cborReader) timestamp() (time.Time, error) {
	v, integer, err := r.number()
	if err != nil {
		return time.Time{}, err
	}
	ms := v
	if !integer || (v > 0 && v < 1e11) {
		ms = v * 1e3
	}
	if math.IsNaN(ms) || math.Abs(ms) > 9e15/1e3 {
		// Well-formed, but past what the SDK's decoder takes as it is
		// (nanoseconds in an int64: years 1678 to 2262): its decoder judges.
		return time.Time{}, errShape
	}
	return time.UnixMilli(int64(ms)).UTC(), nil
}

// blob reads a blob: a byte string (a slice of p, no copy), or a text
// string of standard base64, decoded into dst (returned grown).
func (r *cborReader) blob(dst []byte) (v, grown []byte, err error) {
	m, _, n, err := r.untagged()
	if err != nil {
		return nil, dst, err
	}
	switch m {
	case cborBytes:
		v, err := r.str(m, n)
		return v, dst, err
	case cborText:
		s, err := r.str(m, n)
		if err != nil {
			return nil, dst, err
		}
		k := base64.StdEncoding.DecodedLen(len(s))
		dst = growBytes(dst, k)
		start := len(dst)
		w, err := base64.StdEncoding.Decode(dst[start:start+k], s)
		if err != nil {
			return nil, dst, errShape // not base64: the SDK's decoder says so
		}
		dst = dst[:start+w]
		return dst[start : start+w : start+w], dst, nil
	}
	return nil, dst, r.wrong(m, n)
}

// wrong is the error of an item of another type than expected, whose head
// (major type m, argument n) was read: errShape if the rest of the item is
// well-formed, else errCBOR.
func (r *cborReader) wrong(m cborMajor, n uint64) error {
	// Read the rest of the item as skip would have from its head.
	switch m {
	case cborBytes, cborText:
		if _, err := r.str(m, n); err != nil {
			return err
		}
	case cborArray, cborMap:
		per := 1
		if m == cborMap {
			per = 2
		}
		for i := 0; r.more(n, i); i++ {
			if n != cborIndefinite && n > uint64(len(r.p)-r.i) {
				return errCBOR
			}
			for range per {
				if err := r.skip(1); err != nil {
					return err
				}
			}
		}
	case cborSimple:
		if n == cborIndefinite {
			return errCBOR
		}
	}
	return errShape
}

// float16 converts an IEEE 754 half-precision float.
func float16(h uint16) float64 {
	sign := 1.0
	if h&0x8000 != 0 {
		sign = -1
	}
	exp, frac := int(h>>10&0x1f), float64(h&0x3ff)
	switch exp {
	case 0:
		return sign * math.Ldexp(frac, -24)
	case 31:
		if frac == 0 {
			return sign * math.Inf(1)
		}
		return math.NaN()
	}
	return sign * math.Ldexp(1024+frac, exp-25)
}

// cborWriter appends CBOR items to b.
type cborWriter struct{ b []byte }

func (w *cborWriter) head(m cborMajor, n uint64) { w.b = AppendCBORHead(w.b, byte(m), n) }

// AppendCBORHead appends the head of a CBOR item of major type major (0 to
// 7) with argument n, in its shortest form (test servers use it).
func AppendCBORHead(dst []byte, major byte, n uint64) []byte {
	switch {
	case n < 24:
		return append(dst, major<<5|byte(n))
	case n <= math.MaxUint8:
		return append(dst, major<<5|24, byte(n))
	case n <= math.MaxUint16:
		return binary.BigEndian.AppendUint16(append(dst, major<<5|25), uint16(n))
	case n <= math.MaxUint32:
		return binary.BigEndian.AppendUint32(append(dst, major<<5|26), uint32(n))
	}
	return binary.BigEndian.AppendUint64(append(dst, major<<5|27), n)
}

func (w *cborWriter) text(s string) {
	w.head(cborText, uint64(len(s)))
	w.b = append(w.b, s...)
}

func (w *cborWriter) int(v int64) {
	if v >= 0 {
		w.head(cborUint, uint64(v))
		return
	}
	w.head(cborNegint, uint64(-1-v))
}
