package cache

import (
	"testing"
	"time"
)

func TestFillPolicy(t *testing.T) {
	p := NewFillPolicy(0.1)
	p.Worked(100 * time.Millisecond)
	steps := []struct {
		fill, idle time.Duration
		want       bool
	}{
		{0, 0, true},
		{5 * time.Millisecond, 0, true},   // 5 ms of the 10 ms share
		{6 * time.Millisecond, 0, false},  // 11 ms: over the share
		{0, 50 * time.Millisecond, true},  // the consumer kept workers idle: free time
		{50 * time.Millisecond, 0, false}, // 61 ms > 10 + 50
	}
	for i, s := range steps {
		p.Filled(s.fill)
		p.Idled(s.idle)
		if got := p.Admit(); got != s.want {
			t.Errorf("step %d: Admit() = %t, want %t", i, got, s.want)
		}
	}
	all := NewFillPolicy(1)
	all.Filled(time.Hour)
	if !all.Admit() {
		t.Error("share 1 refused a sample")
	}
}
