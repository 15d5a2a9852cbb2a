package app

import (
	"context"
	"sync"
)

// runner is one piece of background work the app owns: it runs until its context ends.
type runner struct {
	name string
	run  func(ctx context.Context)
}

// runners are started together and stopped together; stop returns once every one has ended.
type runners struct {
	list   []runner
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

func (r *runners) add(name string, run func(ctx context.Context)) {
	r.list = append(r.list, runner{name: name, run: run})
}

func (r *runners) start() {
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	for _, x := range r.list {
		r.wg.Add(1)
		go func() {
			defer r.wg.Done()
			x.run(ctx)
		}()
	}
}

func (r *runners) stop() {
	if r.cancel != nil {
		r.cancel()
	}
	r.wg.Wait()
}
