//go:build race

package pipeline

// raceEnabled: the race detector is on (its shadow memory is resident anonymous memory).
const raceEnabled = true
