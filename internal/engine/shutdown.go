package engine

import (
	"log/slog"
	"sync"
	"time"
)

// stopAll asks every worker of workers (guarded by mu) to drain and
// release, and returns them.
func stopAll[K comparable](mu *sync.Mutex, workers map[K]*worker) []*worker {
	mu.Lock()
	defer mu.Unlock()
	ws := make([]*worker, 0, len(workers))
	for _, w := range workers {
		ws = append(ws, w)
		w.stop()
	}
	return ws
}

// drain waits until every worker of ws (asked to stop) is done, calling
// keepAlive every interval meanwhile (the leases must stay held while they
// drain), and cancels their handlers once timeout has passed.
func drain(log *slog.Logger, ws []*worker, timeout, interval time.Duration, keepAlive func()) {
	log.Info("kinesislease: draining", "leases", len(ws))
	all := make(chan struct{})
	go func() {
		for _, w := range ws {
			<-w.done
		}
		close(all)
	}()
	t := time.NewTimer(timeout)
	defer t.Stop()
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		select {
		case <-all:
			return
		case <-tick.C:
			keepAlive()
		case <-t.C:
			log.Warn("kinesislease: shutdown timeout; cancelling handlers", "timeout", timeout)
			for _, w := range ws {
				w.hardCancel()
			}
		}
	}
}

// readConcurrency bounds the concurrent store calls of a round.
const readConcurrency = 8
