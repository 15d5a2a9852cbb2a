//go:build race

package resilience

const raceEnabled = true
