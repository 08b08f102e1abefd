package rowbook

import (
	"github.com/kinesislease/kinesislease/internal/lostrow"
	"github.com/kinesislease/kinesislease/internal/syncx"
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

// NoteMark records tok, the stream's mark as incarnation inc found or
// wrote it, and returns its kind.
func (b *Book) NoteMark(inc, tok string) lostrow.Mark {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.mark.Inc != inc || b.mark.Token != tok {
		b.mark = Mark{Token: tok, Inc: inc, At: b.now()}
	}
	return b.mark.Kind()
}
