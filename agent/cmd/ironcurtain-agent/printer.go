package main

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"sync"
	"time"

	"ironcurtain.dev/agent/mcpclient"
	"ironcurtain.dev/agent/runner"
)

// printer shows progress on the terminal: steps, code, results, and the
// escalations that are waiting for a human (with a reminder while they
// wait). It is called from the runner and from MCP notification
// goroutines, so it locks.
type printer struct {
	mu       sync.Mutex
	w        io.Writer
	verbose  bool
	pending  map[string]pendingEscalation
	remind   time.Duration
	stopTick chan struct{}
}

type pendingEscalation struct {
	esc   mcpclient.Escalation
	since time.Time
}

func newPrinter(w io.Writer, verbose bool) *printer {
	return &printer{w: w, verbose: verbose, pending: map[string]pendingEscalation{}, remind: 30 * time.Second}
}

// Observe implements runner.Observer.
func (p *printer) Observe(e runner.Event) {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch e.Kind {
	case runner.EventModelText:
		fmt.Fprintf(p.w, "[step %d] %s\n", e.Step, oneLine(e.Text, 300))
	case runner.EventCode:
		if p.verbose {
			fmt.Fprintf(p.w, "[step %d] code:\n%s\n", e.Step, indent(e.Code))
		} else {
			fmt.Fprintf(p.w, "[step %d] running %d lines of code\n", e.Step, strings.Count(strings.TrimRight(e.Code, "\n"), "\n")+1)
		}
	case runner.EventResult:
		r := e.Result
		status := "ok"
		if r.Err != nil {
			status = "error: " + oneLine(r.Err.Error(), 300)
		}
		fmt.Fprintf(p.w, "[step %d] %d tool calls, %s\n", e.Step, r.ToolCalls, status)
		if p.verbose {
			fmt.Fprint(p.w, indent(r.Report()))
			fmt.Fprintln(p.w)
		}
	}
}

// escalation shows an escalation notice from the gateway.
func (p *printer) escalation(esc mcpclient.Escalation) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !esc.Final() {
		if _, already := p.pending[esc.ID]; already {
			return
		}
		p.pending[esc.ID] = pendingEscalation{esc: esc, since: time.Now()}
		fmt.Fprintf(p.w, "waiting for approval of %s: %s (%s)\n", esc.ID, esc.Tool, oneLine(esc.Reason, 200))
		fmt.Fprintf(p.w, "  an operator decides with: ironcurtain escalations approve|deny %s\n", esc.ID)
		p.startTickerLocked()
		return
	}
	delete(p.pending, esc.ID)
	fmt.Fprintf(p.w, "escalation %s %s: %s\n", esc.ID, esc.Status, esc.Tool)
}

// progress shows progress messages of a tool call.
func (p *printer) progress(tool, msg string) {
	if !p.verbose {
		return // escalation notices already say the same
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	fmt.Fprintf(p.w, "  %s: %s\n", tool, oneLine(msg, 200))
}

// startTickerLocked reminds, while escalations are pending, that the run
// is waiting and on what.
func (p *printer) startTickerLocked() {
	if p.stopTick != nil {
		return
	}
	stop := make(chan struct{})
	p.stopTick = stop
	go func() {
		t := time.NewTicker(p.remind)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				p.mu.Lock()
				if len(p.pending) == 0 {
					p.stopTick = nil
					p.mu.Unlock()
					return
				}
				for _, line := range p.pendingLinesLocked() {
					fmt.Fprintf(p.w, "still waiting for approval of %s\n", line)
				}
				p.mu.Unlock()
			}
		}
	}()
}

// pendingLines lists the escalations still waiting, oldest first.
func (p *printer) pendingLines() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.pendingLinesLocked()
}

func (p *printer) pendingLinesLocked() []string {
	list := make([]pendingEscalation, 0, len(p.pending))
	for _, pe := range p.pending {
		list = append(list, pe)
	}
	sort.Slice(list, func(i, j int) bool { return list[i].since.Before(list[j].since) })
	out := make([]string, len(list))
	for i, pe := range list {
		out[i] = fmt.Sprintf("%s (%s, %s)", pe.esc.ID, pe.esc.Tool, time.Since(pe.since).Round(time.Second))
	}
	return out
}

func (p *printer) close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stopTick != nil {
		close(p.stopTick)
		p.stopTick = nil
	}
}

func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > n {
		s = s[:n] + "…"
	}
	return s
}

func indent(s string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	for i, l := range lines {
		lines[i] = "  | " + l
	}
	return strings.Join(lines, "\n")
}
