package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
)

func TestDoctorJSON(t *testing.T) {
	var out bytes.Buffer
	if err := doctor(context.Background(), []string{"--json"}, &out); err != nil {
		t.Fatal(err)
	}
	var rep struct {
		Kernel  string `json:"kernel"`
		IOUring struct {
			Available bool `json:"available"`
			Features  []struct {
				Name      string `json:"name"`
				Supported bool   `json:"supported"`
			} `json:"features"`
		} `json:"io_uring"`
		Interfaces []struct {
			Name              string `json:"name"`
			SocketsGetNAPIIDs bool   `json:"sockets_get_napi_ids"`
			Reason            string `json:"reason"`
		} `json:"interfaces"`
	}
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatalf("doctor --json is not JSON: %v\n%s", err, out.String())
	}
	if rep.Kernel == "" || !rep.IOUring.Available {
		t.Fatalf("report: %s", out.String())
	}
	want := map[string]bool{"IORING_REGISTER_NAPI": false, "multishot recv with buffer ring": false}
	for _, f := range rep.IOUring.Features {
		if _, ok := want[f.Name]; ok {
			want[f.Name] = f.Supported
		}
	}
	for name, ok := range want {
		if !ok {
			t.Errorf("%s not reported as supported", name)
		}
	}
	sawLo := false
	for _, i := range rep.Interfaces {
		if i.Name == "lo" {
			sawLo = true
			if i.SocketsGetNAPIIDs || !strings.Contains(i.Reason, "SO_INCOMING_NAPI_ID 0") {
				t.Errorf("loopback: %+v, want no NAPI ids measured on a socket", i)
			}
		}
	}
	if !sawLo {
		t.Error("no loopback interface in the report")
	}
}

func TestDoctorText(t *testing.T) {
	var out bytes.Buffer
	if err := doctor(context.Background(), nil, &out); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"kernel", "io_uring features:", "IORING_REGISTER_NAPI", "interfaces (do sockets get NAPI ids?):", "lo"} {
		if !strings.Contains(out.String(), s) {
			t.Errorf("text report lacks %q:\n%s", s, out.String())
		}
	}
}
