package topo

import (
	"os"
	"testing"
)

// BenchmarkParseInterrupts parses the 24-CPU fixture's /proc/interrupts,
// which diagnosis does twice per sample.
func BenchmarkParseInterrupts(b *testing.B) {
	data, err := os.ReadFile("testdata/2socket-16q/proc/interrupts")
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		if _, err := ParseInterrupts(data); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkReadFixture reads a whole fixture host, the cost of one
// `spindle tune inspect --root`.
func BenchmarkReadFixture(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ReadFixture("testdata/2socket-16q"); err != nil {
			b.Fatal(err)
		}
	}
}
