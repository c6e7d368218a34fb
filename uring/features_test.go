package uring

import (
	"errors"
	"strings"
	"testing"
)

func TestFeaturesErr(t *testing.T) {
	f := &Features{List: []Feature{
		{Name: "yes", Supported: true, MinKernel: "5.1"},
		{Name: "no", Supported: false, MinKernel: "6.9", Reason: "io_uring_register: invalid argument"},
	}}
	tests := []struct {
		name string
		want []string // substrings of the error; nil: no error
	}{
		{"yes", nil},
		{"no", []string{"no not supported (requires >= 6.9)", "invalid argument"}},
		{"unknown", []string{"unknown not supported", "not probed"}},
	}
	for _, tt := range tests {
		err := f.Err(tt.name)
		if tt.want == nil {
			if err != nil || !f.Has(tt.name) {
				t.Errorf("Err(%q) = %v, Has = %v", tt.name, err, f.Has(tt.name))
			}
			continue
		}
		if !errors.Is(err, ErrNotSupported) || f.Has(tt.name) {
			t.Errorf("Err(%q) = %v, want ErrNotSupported", tt.name, err)
			continue
		}
		for _, w := range tt.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("Err(%q) = %q, want it to contain %q", tt.name, err, w)
			}
		}
	}
}
