package sys

import "testing"

func TestBufRingTailWord(t *testing.T) {
	b, err := NewBufRingMem(8)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Unmap()
	b.Entries[0].Bid = 5
	b.PublishTail(0x1234)
	if b.Entries[0].Resv != 0x1234 || b.Entries[0].Bid != 5 || b.Tail() != 0x1234 {
		t.Errorf("tail %#x bid %d after PublishTail(0x1234)", b.Entries[0].Resv, b.Entries[0].Bid)
	}
	for _, n := range []int{0, 3, 1 << 16} {
		if _, err := NewBufRingMem(n); err == nil {
			t.Errorf("NewBufRingMem(%d) succeeded", n)
		}
	}
}
