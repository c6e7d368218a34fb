package proxy

import (
	"bufio"
	"bytes"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/spindlenet/spindle/engine"
)

// TestAccessLogUpgradeTunnel: the line of an exchange whose 101 made the
// connections a tunnel is written when the tunnel ends, as HAProxy,
// nginx and Envoy log an upgraded connection: its req_bytes and
// resp_bytes count the bytes each way through the tunnel (those that
// came with the request head and with the 101 included), its duration
// the tunnel's life, its term how the tunnel ended; the server's byte
// counters count the bytes the client sent with its head too. (The line
// was written at the 101: 0 and 0 bytes, the handshake's duration,
// nothing of the tunnel.)
func TestAccessLogUpgradeTunnel(t *testing.T) {
	const resp101 = "HTTP/1.1 101 Switching Protocols\r\nConnection: upgrade\r\nUpgrade: websocket\r\n\r\n"
	forBackends(t, func(t *testing.T, b engine.Backend) {
		heads := make(chan string, 1)
		read := make(chan int64, 1)
		u := newUpstream(t, func(c net.Conn) {
			head, ok := readHeadBytes(c)
			if !ok {
				return
			}
			heads <- head
			c.SetReadDeadline(time.Time{})
			io.WriteString(c, resp101+"hello")
			n, _ := io.Copy(struct{ io.Writer }{c}, struct{ io.Reader }{c})
			read <- n
			c.(*net.TCPConn).CloseWrite()
			io.Copy(io.Discard, c)
		})
		path := filepath.Join(t.TempDir(), "access.log")
		cfg := httpConfig(b, u.addr)
		cfg.Listeners[0].AccessLog = &AccessLogConfig{Path: path}
		p := startProxy(t, cfg)
		c := dial(t, p)
		io.WriteString(c, "GET /ws HTTP/1.1\r\nHost: x\r\nConnection: upgrade\r\nUpgrade: websocket\r\n\r\nearly")
		br := bufio.NewReader(c)
		c.SetReadDeadline(time.Now().Add(10 * time.Second))
		resp, err := http.ReadResponse(br, &http.Request{Method: "GET"})
		if err != nil || resp.StatusCode != 101 {
			t.Fatalf("%v, %v; want a 101", resp, err)
		}
		head := <-heads
		data := randomBytes(5, 256<<10)
		go c.Write(data)
		got := make([]byte, len("hello")+len("early")+len(data))
		if _, err := io.ReadFull(br, got); err != nil {
			t.Fatal(err)
		}
		if string(got[:10]) != "helloearly" || !bytes.Equal(got[10:], data) {
			t.Fatal("tunneled bytes differ")
		}
		t0 := time.Now()
		time.Sleep(200 * time.Millisecond)
		if lines := logLines(t, path); len(lines) != 0 {
			t.Errorf("a line before the tunnel's end: %v", lines)
		}
		c.CloseWrite()
		if rest, err := io.ReadAll(br); err != nil || len(rest) != 0 {
			t.Fatalf("read %d bytes, %v; want the server's end", len(rest), err)
		}
		up := int64(len("early") + len(data))
		if n := <-read; n != up {
			t.Fatalf("the server read %d bytes through the tunnel, want %d", n, up)
		}
		m := waitLine(t, path, "the tunnel's line", func(map[string]any) bool { return true })
		down := int64(len("hello")) + up
		checkFields(t, m, map[string]string{"status": "101", "target": "/ws", "req_bytes": strconv.FormatInt(up, 10), "resp_bytes": strconv.FormatInt(down, 10), "term": "-", "server": u.addr})
		if d, _ := m["duration_us"].(float64); time.Duration(d)*time.Microsecond < 200*time.Millisecond {
			t.Errorf("duration_us %v, want the tunnel's life (over %v)", m["duration_us"], time.Since(t0).Truncate(time.Millisecond))
		}
		st := serverTotals(p, u.addr)
		if want := uint64(len(head)) + uint64(up); st.BytesOut != want {
			t.Errorf("server BytesOut %d, want %d (the head, then the tunnel's bytes)", st.BytesOut, want)
		}
		if want := uint64(len(resp101)) + uint64(down); st.BytesIn != want {
			t.Errorf("server BytesIn %d, want %d (the 101, then the tunnel's bytes)", st.BytesIn, want)
		}
	})
}
