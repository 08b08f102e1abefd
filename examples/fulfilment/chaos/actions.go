package main

// The chaos itself: the plan carried out, each action at its time
// (chaos); one action (execute): a SIGKILL and the slot restarted after its
// hold, a SIGSTOP and the SIGCONT after its hold, or a SIGINT, the graceful
// exit waited for and the slot restarted; and what became of it
// (actionRecord).

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// actionRecord is what became of a planned action.
type actionRecord struct {
	action
	Owner, NewOwner string    // the process disrupted; the one started in its place
	Start, End      time.Time // signal sent; SIGCONT sent or new process started
	Skipped         string    // why it was not carried out
}

// chaos carries out the plan: each action at its time, in a goroutine of
// its own, skipped if its slot is not up or too many are down (a graceful
// stop that took longer than planned). It returns once the chaos duration
// passed and every action ended.
func (r *runner) chaos(ctx context.Context) error {
	t0 := time.Now()
	r.printf("chaos starts: %d actions over %v, at most %d of %d instances down at once\n",
		len(r.plan), r.cfg.Duration, r.cfg.MaxDown, r.cfg.Instances)
	var wg sync.WaitGroup
	defer wg.Wait()
	actCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	check := time.NewTicker(100 * time.Millisecond)
	defer check.Stop()
	wait := func(until time.Time) error {
		for time.Now().Before(until) {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-check.C:
			case <-time.After(time.Until(until)):
			}
			if err := r.failed(); err != nil {
				return err
			}
		}
		return nil
	}
	for _, a := range r.plan {
		if err := wait(t0.Add(a.At)); err != nil {
			cancel()
			return err
		}
		wg.Go(func() { r.execute(actCtx, a) })
	}
	if err := wait(t0.Add(r.cfg.Duration)); err != nil {
		cancel()
		return err
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	for {
		select {
		case <-done:
			return r.failed()
		case <-ctx.Done():
			cancel()
			return ctx.Err()
		case <-check.C:
			if err := r.failed(); err != nil {
				cancel()
				return err
			}
		}
	}
}

// execute carries out one action.
func (r *runner) execute(ctx context.Context, a action) {
	rec := actionRecord{action: a}
	r.mu.Lock()
	p := r.slots[a.Slot]
	down := 0
	for _, q := range r.slots {
		if q.dead || q.stopped || q.draining {
			down++
		}
	}
	switch {
	case p.dead || p.stopped || p.draining:
		rec.Skipped = fmt.Sprintf("slot %d not up yet", a.Slot+1)
	case down >= r.cfg.MaxDown:
		rec.Skipped = fmt.Sprintf("%d instances down already", down)
	}
	rec.Owner = p.Owner
	if rec.Skipped != "" {
		r.actions = append(r.actions, rec)
		r.mu.Unlock()
		r.printf("skip %s on %s: %s\n", a.Kind, p.Owner, rec.Skipped)
		return
	}
	defer func() {
		r.mu.Lock()
		r.actions = append(r.actions, rec)
		r.mu.Unlock()
	}()
	switch a.Kind {
	case kill:
		p.dead = true
		p.Expect()
	case stop:
		p.stopped = true
	case interrupt:
		p.draining = true
		p.Expect()
	}
	r.mu.Unlock()

	sleep := func(d time.Duration) bool {
		select {
		case <-ctx.Done():
			return false
		case <-time.After(d):
			return true
		}
	}
	waitExit := func() error {
		select {
		case <-p.Done():
			return nil
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(r.cfg.exitTimeout()):
			return fmt.Errorf("%s still running %v after %s", p.Owner, r.cfg.exitTimeout(), a.Kind)
		}
	}
	restart := func() {
		if err := r.start(a.Slot); err != nil {
			r.fail(err)
			return
		}
		r.mu.Lock()
		rec.NewOwner = r.slots[a.Slot].Owner
		rec.End = r.slots[a.Slot].started
		r.mu.Unlock()
	}

	switch a.Kind {
	case kill:
		p.Kill()
		rec.Start = time.Now()
		r.mu.Lock()
		p.killedAt = rec.Start
		r.mu.Unlock()
		r.printf("SIGKILL %s (restart in %v)\n", p.Owner, a.Hold.Round(time.Millisecond))
		if err := waitExit(); err != nil {
			r.fail(fmt.Errorf("chaos: %w", err))
			return
		}
		if !sleep(a.Hold) {
			return
		}
		restart()
	case stop:
		if err := p.Stop(); err != nil {
			r.fail(fmt.Errorf("chaos: SIGSTOP %s: %w", p.Owner, err))
			return
		}
		rec.Start = time.Now()
		r.printf("SIGSTOP %s for %v (timeout %v)\n", p.Owner, a.Hold.Round(time.Millisecond), r.cfg.Timeout)
		sleep(a.Hold) // on cancellation, continue it anyway: cleanup kills it
		rec.End = time.Now()
		if err := p.Continue(); err != nil && !p.Exited() {
			r.fail(fmt.Errorf("chaos: SIGCONT %s: %w", p.Owner, err))
		}
		r.mu.Lock()
		p.stops = append(p.stops, episode{Stop: rec.Start, Cont: rec.End})
		p.stopped = false
		r.mu.Unlock()
		r.printf("SIGCONT %s after %v\n", p.Owner, rec.End.Sub(rec.Start).Round(time.Millisecond))
	case interrupt:
		rec.Start = time.Now()
		r.mu.Lock()
		p.interruptAt = rec.Start
		r.mu.Unlock()
		if err := p.Interrupt(); err != nil {
			r.fail(fmt.Errorf("chaos: SIGINT %s: %w", p.Owner, err))
			return
		}
		r.printf("SIGINT %s (restart %v after it exits)\n", p.Owner, a.Hold.Round(time.Millisecond))
		if err := waitExit(); err != nil {
			r.problem(fmt.Sprintf("graceful stop: %v; killed", err))
			p.Kill()
			<-p.Done()
		} else if p.Err() != nil {
			r.problem(fmt.Sprintf("graceful stop: %s exited with %v after SIGINT; the end of its log:\n%s", p.Owner, p.Err(), p.LogTail()))
		} else {
			r.printf("%s exited after %v\n", p.Owner, time.Since(rec.Start).Round(time.Millisecond))
		}
		if !sleep(a.Hold) {
			return
		}
		restart()
	}
}
