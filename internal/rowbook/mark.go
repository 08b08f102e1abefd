package rowbook

import (
	"cmp"

	"github.com/kinesislease/kinesislease/internal/lostrow"
	"github.com/kinesislease/kinesislease/internal/syncx"
	"github.com/kinesislease/kinesislease/kltype"
	"github.com/kinesislease/kinesislease/leases"
)

// Mark is what this instance knows of a stream's mark: the token it
// found or wrote, as incarnation Inc, and when (At, on the book's clock);
// Round is the round in which Inc last found none.
type Mark struct {
	Token, Inc string
	At         int64
	Round      int
}

// Kind is the lostrow.Mark of a mark known.
func (m Mark) Kind() lostrow.Mark {
	if m.Token == m.Inc {
		return lostrow.MarkOurs
	}
	return lostrow.MarkOther
}

// Mark returns what this instance knows of the stream's mark.
func (b *Book) Mark() Mark {
	return syncx.Guarded(&b.mu, func() Mark { return b.mark })
}

// SetMark replaces what this instance knows of the stream's mark with m.
func (b *Book) SetMark(m Mark) {
	syncx.Guard(&b.mu, func() { b.mark = m })
}

// NoteMark records m, the stream's mark as incarnation inc found or wrote
// it, and returns its kind. Its Since becomes LATEST's moment (Start).
func (b *Book) NoteMark(inc string, m leases.Mark) lostrow.Mark {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.mark.Inc != inc || b.mark.Token != m.Token {
		b.mark = Mark{Token: m.Token, Inc: inc, At: b.now()}
	}
	b.recorded = m.Since
	return b.mark.Kind()
}

// Ours returns the mark incarnation inc writes: its token, and when this
// instance's subscription began, for the members that read the stream
// after it (Start).
func (b *Book) Ours(inc string) leases.Mark {
	return leases.Mark{Token: inc, Since: b.since}
}

// Start returns where a shard of the stream with no checkpoint starts: the
// subscription's start position, LATEST as an AT_TIMESTAMP of when the
// subscription began. That moment is the Since of the stream's mark as last
// noted (the first marker's: the same on every member), or this
// instance's own when the mark carries none (written by a version before
// Since) or none was noted; LATEST itself if neither is known.
func (b *Book) Start() kltype.StartPosition {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.start.Type != kltype.PositionLatest {
		return b.start
	}
	if at := cmp.Or(b.recorded, b.since); !at.IsZero() {
		return kltype.AtTimestamp(at)
	}
	return b.start
}
