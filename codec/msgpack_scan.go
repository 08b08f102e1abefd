package codec

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// maxMsgpackDepth bounds the nesting of arrays and maps that Msgpack will
// decode, as encoding/json bounds its own nesting at 10000. The MessagePack
// library decodes nested values recursively, so without a bound a record of a
// few megabytes of nested array headers overflows the goroutine stack, which
// kills the process instead of returning an error.
const maxMsgpackDepth = 10000

var (
	errMsgpackTooDeep = fmt.Errorf("msgpack: exceeded max depth of %d", maxMsgpackDepth)
	errMsgpackCode    = errors.New("msgpack: invalid code 0xc1")
)

var errTrailingData = errors.New("msgpack: trailing data after top-level value")

// scanMsgpack checks that data holds exactly one well-formed MessagePack
// value nested no deeper than maxMsgpackDepth, without decoding it. It runs
// before the reflective decoder so that malformed, truncated or hostile input
// is rejected cheaply and without recursion. Extension payloads are opaque to
// it.
func scanMsgpack(data []byte) error {
	// open holds, for each array or map being scanned, how many values it
	// still expects (two per map entry).
	var openBuf [16]uint64
	open := openBuf[:0]
	i := 0
	for {
		if i >= len(data) {
			return io.ErrUnexpectedEOF
		}
		c := data[i]
		i++
		var (
			skip     uint64 // payload bytes after the header
			children uint64 // values contained, for arrays and maps
			isCont   bool
			err      error
		)
		switch {
		case c <= 0x7f || c >= 0xe0: // positive and negative fixint
		case c <= 0x8f: // fixmap
			children, isCont = 2*uint64(c&0x0f), true
		case c <= 0x9f: // fixarray
			children, isCont = uint64(c&0x0f), true
		case c <= 0xbf: // fixstr
			skip = uint64(c & 0x1f)
		default:
			switch c {
			case 0xc0, 0xc2, 0xc3: // nil, false, true
			case 0xc1:
				return errMsgpackCode
			case 0xc4, 0xd9: // bin8, str8
				skip, i, err = readLen(data, i, 1)
			case 0xc5, 0xda: // bin16, str16
				skip, i, err = readLen(data, i, 2)
			case 0xc6, 0xdb: // bin32, str32
				skip, i, err = readLen(data, i, 4)
			case 0xc7: // ext8: length, type, payload
				skip, i, err = readLen(data, i, 1)
				skip++
			case 0xc8: // ext16
				skip, i, err = readLen(data, i, 2)
				skip++
			case 0xc9: // ext32
				skip, i, err = readLen(data, i, 4)
				skip++
			case 0xcc, 0xd0: // uint8, int8
				skip = 1
			case 0xcd, 0xd1: // uint16, int16
				skip = 2
			case 0xca, 0xce, 0xd2: // float32, uint32, int32
				skip = 4
			case 0xcb, 0xcf, 0xd3: // float64, uint64, int64
				skip = 8
			case 0xd4, 0xd5, 0xd6, 0xd7, 0xd8: // fixext 1, 2, 4, 8, 16 plus type
				skip = 1 + 1<<(c-0xd4)
			case 0xdc: // array16
				children, i, err = readLen(data, i, 2)
				isCont = true
			case 0xdd: // array32
				children, i, err = readLen(data, i, 4)
				isCont = true
			case 0xde: // map16
				children, i, err = readLen(data, i, 2)
				children, isCont = 2*children, true
			case 0xdf: // map32
				children, i, err = readLen(data, i, 4)
				children, isCont = 2*children, true
			}
		}
		if err != nil {
			return err
		}
		rest := uint64(len(data) - i)
		if skip > rest {
			return io.ErrUnexpectedEOF
		}
		i += int(skip)
		// Every value takes at least one byte, so a container cannot hold
		// more values than there are bytes left.
		if children > uint64(len(data)-i) {
			return io.ErrUnexpectedEOF
		}
		if isCont && children > 0 {
			if len(open) == maxMsgpackDepth {
				return errMsgpackTooDeep
			}
			open = append(open, children)
			continue
		}
		// A scalar or empty container completes a value: close every
		// container it completes.
		for len(open) > 0 {
			open[len(open)-1]--
			if open[len(open)-1] > 0 {
				break
			}
			open = open[:len(open)-1]
		}
		if len(open) == 0 {
			if i < len(data) {
				return fmt.Errorf("%w (%d bytes)", errTrailingData, len(data)-i)
			}
			return nil
		}
	}
}

// readLen reads an n-byte big-endian length at data[i:].
func readLen(data []byte, i, n int) (uint64, int, error) {
	if len(data)-i < n {
		return 0, i, io.ErrUnexpectedEOF
	}
	b := data[i : i+n]
	switch n {
	case 1:
		return uint64(b[0]), i + n, nil
	case 2:
		return uint64(binary.BigEndian.Uint16(b)), i + n, nil
	default:
		return uint64(binary.BigEndian.Uint32(b)), i + n, nil
	}
}
