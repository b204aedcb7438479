package main

import (
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
)

// isTerminal reports whether w is a terminal, where convert and bench draw their progress
// bars. Tests replace it.
var isTerminal = func(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// termWidth is the terminal's width as the shell exports it in COLUMNS, else 80.
func termWidth() int {
	if n, err := strconv.Atoi(os.Getenv("COLUMNS")); err == nil && n >= 20 {
		return n
	}
	return 80
}

// progressState is one redraw of a progress bar.
type progressState struct {
	Prefix      string  // what is running, e.g. "workers=2 epoch 1/3"; may be empty
	Done, Total int     // images
	Rate        float64 // images per second, for the rate and the ETA
	Bad         int
	ShowBad     bool // print the bad count even when it is zero
}

// progress draws a progress bar, when its writer is a terminal, and keeps log lines
// and output lines written meanwhile from tearing it. Without a terminal it writes
// nothing, or, when every is set, a progress line every so often (for CI logs).
// Updates and log lines may come from any goroutine.
type progress struct {
	w     io.Writer
	tty   bool
	width int
	every time.Duration // without a terminal, the interval between progress lines; 0: none

	mu     sync.Mutex
	drawn  bool // the bar is on the current line
	last   progressState
	lineAt time.Time // without a terminal: when the last line was written, or the run began
}

// progressLineEvery is how often bench writes a progress line when its stderr is not a
// terminal. Tests shorten it.
var progressLineEvery = 5 * time.Second

func newProgress(w io.Writer) *progress {
	return &progress{w: w, tty: isTerminal(w), width: termWidth()}
}

func (p *progress) update(s progressState) {
	if !p.tty && p.every <= 0 {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.last = s
	if p.tty {
		p.draw()
		return
	}
	now := time.Now()
	switch {
	case p.lineAt.IsZero():
		p.lineAt = now
	case now.Sub(p.lineAt) >= p.every:
		p.lineAt = now
		fmt.Fprintln(p.w, progressText(s))
	}
}

// printTo writes text, whole lines, to w (usually stdout) with the bar cleared from the
// terminal first and redrawn after, so that the two never share a line.
func (p *progress) printTo(w io.Writer, text string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.drawn {
		fmt.Fprint(p.w, "\r\x1b[K")
	}
	io.WriteString(w, text)
	if p.drawn {
		p.draw()
	}
}

func (p *progress) draw() {
	// \x1b[K clears what a longer previous line left.
	fmt.Fprintf(p.w, "\r%s\x1b[K", progressLine(p.last, p.width))
	p.drawn = true
}

func (p *progress) logf(format string, args ...any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.drawn {
		fmt.Fprint(p.w, "\r\x1b[K")
	}
	fmt.Fprintf(p.w, format+"\n", args...)
	if p.drawn {
		p.draw()
	}
}

// finish ends the bar: it stays on its own line when keep is set and is cleared
// otherwise, so what follows starts on a clean line.
func (p *progress) finish(keep bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.lineAt = time.Time{}
	if !p.drawn {
		return
	}
	if keep {
		fmt.Fprintln(p.w)
	} else {
		fmt.Fprint(p.w, "\r\x1b[K")
	}
	p.drawn = false
}

// progressLine formats one redraw of the progress bar in fewer than width columns:
//
//	prefix [=========>          ] 1234/5000  24.7%  812 img/s  ETA 4m38s  bad 2
//
// The ETA assumes what is left goes at the rate. The bar is left out when fewer than ten
// columns remain for it.
func progressLine(p progressState, width int) string {
	pct := 0.0
	if p.Total > 0 {
		pct = 100 * float64(p.Done) / float64(p.Total)
	}
	eta := "--"
	switch {
	case p.Done >= p.Total:
		eta = "0s"
	case p.Rate > 0:
		eta = shortDuration(time.Duration(float64(p.Total-p.Done) / p.Rate * float64(time.Second)))
	}
	// Fixed widths keep the bar from jittering as the numbers grow.
	stats := fmt.Sprintf(" %*d/%d %5.1f%% %6.0f img/s  ETA %-6s", len(strconv.Itoa(p.Total)), p.Done, p.Total, pct, p.Rate, eta)
	if p.Bad > 0 || p.ShowBad {
		stats += fmt.Sprintf(" bad %d", p.Bad)
	}
	stats = strings.TrimRight(stats, " ")
	prefix := ""
	if p.Prefix != "" {
		prefix = p.Prefix + " "
	}
	room := width - 1 - len(prefix) - len(stats) - 2 // the last column is left free: some terminals wrap there
	if room < 10 {
		line := strings.TrimPrefix(prefix+strings.TrimPrefix(stats, " "), " ")
		if len(line) > width-1 {
			line = line[:max(0, width-1)]
		}
		return line
	}
	fill := min(room, room*p.Done/max(p.Total, 1))
	bar := strings.Repeat("=", fill)
	if 0 < fill && fill < room {
		bar = bar[:fill-1] + ">"
	}
	return prefix + "[" + bar + strings.Repeat(" ", room-fill) + "]" + stats
}

// progressText is one progress line without a terminal:
//
//	conveyor: workers=2 1234/5000 images (24.7%), 812 img/s, ETA 4m38s, bad 2
func progressText(p progressState) string {
	var b strings.Builder
	b.WriteString("conveyor: ")
	if p.Prefix != "" {
		b.WriteString(p.Prefix + " ")
	}
	pct := 0.0
	if p.Total > 0 {
		pct = 100 * float64(p.Done) / float64(p.Total)
	}
	fmt.Fprintf(&b, "%d/%d images (%.1f%%), %.0f img/s", p.Done, p.Total, pct, p.Rate)
	if p.Rate > 0 && p.Done < p.Total {
		fmt.Fprintf(&b, ", ETA %s", shortDuration(time.Duration(float64(p.Total-p.Done)/p.Rate*float64(time.Second))))
	}
	if p.Bad > 0 || p.ShowBad {
		fmt.Fprintf(&b, ", bad %d", p.Bad)
	}
	return b.String()
}

// shortDuration prints d to the second, at most two units: "12s", "4m38s", "2h05m".
func shortDuration(d time.Duration) string {
	s := int64(d.Round(time.Second) / time.Second)
	switch {
	case s < 60:
		return fmt.Sprintf("%ds", s)
	case s < 3600:
		return fmt.Sprintf("%dm%02ds", s/60, s%60)
	}
	return fmt.Sprintf("%dh%02dm", s/3600, s%3600/60)
}
