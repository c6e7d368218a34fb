package grpcinterop

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/spindlenet/spindle/engine"
	"github.com/spindlenet/spindle/proxy"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/interop"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/stats"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// forBackends runs f as a subtest for each of the engine's backends
// (the proxy's own data-path tests take uring and epoll; these few take
// them all: busy polling and SQPOLL too).
func forBackends(t *testing.T, f func(t *testing.T, b engine.Backend)) {
	for _, b := range engine.Backends {
		t.Run(string(b), func(t *testing.T) { f(t, b) })
	}
}

// maxMsg is the message size bound of the test's servers and clients,
// above grpc-go's default 4 MiB for TestLargeMessage.
const maxMsg = 16 << 20

// env is a gRPC server (grpc-go's interop TestService and peerDesc),
// a proxy in front of it (an h2c listener, a pool with protocol h2c) and
// a gRPC client connection through the proxy.
type env struct {
	p    *proxy.Proxy
	srv  string // the gRPC server's address
	cc   *grpc.ClientConn
	tc   testgrpc.TestServiceClient
	seen *serverStats
	// clients is how many HTTP/2 connections the proxy's listener is to
	// have had: 1, cc's, and those a test made besides.
	clients uint64
}

// start starts an env on backend b until the test ends, its gRPC server
// with opts.
func start(t *testing.T, b engine.Backend, opts ...grpc.ServerOption) *env {
	t.Helper()
	return startProxy(t, b, nil, opts...)
}

// startProxy is start with the proxy's config changed by edit.
func startProxy(t *testing.T, b engine.Backend, edit func(*proxy.Config), opts ...grpc.ServerOption) *env {
	t.Helper()
	e := &env{seen: new(serverStats), clients: 1}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := grpc.NewServer(append([]grpc.ServerOption{grpc.StatsHandler(e.seen), grpc.MaxRecvMsgSize(maxMsg),
		grpc.UnaryInterceptor(e.seen.unary), grpc.StreamInterceptor(e.seen.stream)}, opts...)...)
	testgrpc.RegisterTestServiceServer(s, interop.NewTestServer())
	s.RegisterService(&peerDesc, nil)
	served := make(chan error, 1)
	go func() { served <- s.Serve(ln) }()
	t.Cleanup(func() {
		s.Stop()
		if err := <-served; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	e.srv = ln.Addr().String()

	cfg := &proxy.Config{
		Engine: proxy.EngineConfig{Backend: string(b), CPUs: []int{0}},
		Listeners: []proxy.ListenerConfig{{
			Name: "grpc", Listen: "127.0.0.1:0", Mode: proxy.ModeHTTP, H2C: true, Pool: "app",
			ConnectTimeout: proxy.Duration(2 * time.Second),
		}},
		Pools: []proxy.PoolConfig{{Name: "app", Protocol: proxy.ProtocolH2C, Servers: proxy.Servers(e.srv)}},
		Admin: proxy.AdminConfig{Listen: "127.0.0.1:0"},
	}
	if edit != nil {
		edit(cfg)
	}
	e.p, err = proxy.New(cfg, &proxy.Options{Drain: time.Second, Logf: func(string, ...any) {}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- e.p.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-ran; err != nil {
			t.Errorf("Run: %v", err)
		}
	})

	e.cc, err = grpc.NewClient("passthrough:///"+e.p.Addr("grpc").String(),
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(maxMsg), grpc.MaxCallSendMsgSize(maxMsg)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.cc.Close() })
	e.tc = testgrpc.NewTestServiceClient(e.cc)
	return e
}

// serverStats is what the gRPC server saw: the connections it accepted
// and the RPCs it began (a header received), as its stats.Handler; the
// handlers in progress, the most of them at once and those that ended
// canceled, as its interceptors.
type serverStats struct {
	conns, rpcs            atomic.Int64
	active, peak, canceled atomic.Int64
}

func (*serverStats) TagRPC(ctx context.Context, _ *stats.RPCTagInfo) context.Context   { return ctx }
func (*serverStats) TagConn(ctx context.Context, _ *stats.ConnTagInfo) context.Context { return ctx }

func (s *serverStats) HandleRPC(_ context.Context, st stats.RPCStats) {
	if _, ok := st.(*stats.InHeader); ok {
		s.rpcs.Add(1)
	}
}

func (s *serverStats) HandleConn(_ context.Context, st stats.ConnStats) {
	if _, ok := st.(*stats.ConnBegin); ok {
		s.conns.Add(1)
	}
}

// handle counts a handler from its start to its end.
func (s *serverStats) handle(ctx context.Context, h func() error) error {
	n := s.active.Add(1)
	for p := s.peak.Load(); n > p && !s.peak.CompareAndSwap(p, n); p = s.peak.Load() {
	}
	err := h()
	if status.Code(err) == codes.Canceled || ctx.Err() == context.Canceled {
		s.canceled.Add(1)
	}
	s.active.Add(-1)
	return err
}

func (s *serverStats) unary(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (resp any, err error) {
	err = s.handle(ctx, func() error {
		resp, err = h(ctx, req)
		return err
	})
	return resp, err
}

func (s *serverStats) stream(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, h grpc.StreamHandler) error {
	return s.handle(ss.Context(), func() error { return h(srv, ss) })
}

// peerDesc is the tests' own service, spindle.test.Peer: Echo sends
// each message back as it came (bytes, so that a test can check them) and
// ends at the client's end; Stall answers nothing for 300ms, whatever
// the RPC's deadline (a handler that does not heed it), so that a short
// one ends the stream by grpc-go's timer: RST_STREAM(CANCEL), no
// response.
var peerDesc = grpc.ServiceDesc{
	ServiceName: "spindle.test.Peer",
	HandlerType: (*any)(nil),
	Streams: []grpc.StreamDesc{{
		StreamName: "Echo", ServerStreams: true, ClientStreams: true,
		Handler: func(_ any, s grpc.ServerStream) error {
			for {
				m := new(wrapperspb.BytesValue)
				if err := s.RecvMsg(m); err != nil {
					if err == io.EOF {
						return nil
					}
					return err
				}
				if err := s.SendMsg(m); err != nil {
					return err
				}
			}
		},
	}, {
		StreamName: "Stall", ServerStreams: true, ClientStreams: true,
		Handler: func(any, grpc.ServerStream) error {
			time.Sleep(300 * time.Millisecond)
			return nil
		},
	}},
}

// echo sends each of msgs on one Echo stream, each once the last came
// back, checks what came back, and ends the stream. ready, if not nil,
// is called once the first message came back, and returns when the
// stream may go on.
func echo(ctx context.Context, cc *grpc.ClientConn, msgs [][]byte, ready func()) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	s, err := cc.NewStream(ctx, &peerDesc.Streams[0], "/spindle.test.Peer/Echo")
	if err != nil {
		return err
	}
	for i, m := range msgs {
		if err := s.SendMsg(wrapperspb.Bytes(m)); err != nil {
			return fmt.Errorf("send %d: %w", i, err)
		}
		got := new(wrapperspb.BytesValue)
		if err := s.RecvMsg(got); err != nil {
			return fmt.Errorf("receive %d: %w", i, err)
		}
		if !bytes.Equal(got.Value, m) {
			return fmt.Errorf("message %d: %d bytes came back, not the %d sent", i, len(got.Value), len(m))
		}
		if i == 0 && ready != nil {
			ready()
		}
	}
	if err := s.CloseSend(); err != nil {
		return err
	}
	if err := s.RecvMsg(new(wrapperspb.BytesValue)); err != io.EOF {
		return fmt.Errorf("stream's end: %v, want EOF", err)
	}
	return nil
}

// random returns n random bytes (seeded by seed).
func random(seed uint64, n int) []byte {
	r := rand.NewChaCha8([32]byte{byte(seed), byte(seed >> 8), byte(seed >> 16)})
	p := make([]byte, n)
	r.Read(p)
	return p
}

// finish closes the client's connection and, once the proxy let go of
// it and of its streams, checks that the server's handlers all ended;
// that every RPC the proxy sent to the server went as an HTTP/2 stream
// (its Requests are its H2Streams) and that the server began each of
// them, but those it refused and at most unseen others (the RPCs whose
// client gave up at once: the proxy may open their stream after the
// client's end, its HEADERS and RST_STREAM then still on their way, and
// grpc-go drops a stream whose deadline has passed when it comes); that
// the server's connections were the proxy's connects; that /metrics says
// so too; and that the clients came over e.clients HTTP/2 connections.
func (e *env) finish(t *testing.T, unseen uint64) {
	t.Helper()
	e.cc.Close()
	var tot proxy.Totals
	var st proxy.ServerTotals
	quiet := eventually(func() bool {
		tot = e.p.Totals()
		busy := false
		for _, l := range tot.Listeners {
			busy = busy || l.Active != 0
		}
		for _, s := range tot.Servers {
			if s.Server == e.srv {
				st = s
			}
		}
		return !busy && st.Active == 0
	})
	if !quiet {
		t.Errorf("the proxy still has the client's connection or its streams: %+v", tot)
	}
	if !eventually(func() bool { return e.seen.active.Load() == 0 }) {
		t.Errorf("%d of the server's handlers still in progress", e.seen.active.Load())
	}
	rpcs, conns := uint64(e.seen.rpcs.Load()), uint64(e.seen.conns.Load())
	processed := st.H2Streams - st.H2Refused
	if st.H2Streams == 0 || st.Requests != st.H2Streams || rpcs > processed || rpcs+unseen < processed {
		t.Errorf("server totals: %d requests, %d h2 streams (%d refused); the gRPC server began %d RPCs (%d may be unseen)", st.Requests, st.H2Streams, st.H2Refused, rpcs, unseen)
	}
	if st.Connects == 0 || st.Connects != conns {
		t.Errorf("server totals: %d connects; the gRPC server accepted %d", st.Connects, conns)
	}
	want := fmt.Sprintf("spindle_proxy_server_h2_streams_total{pool=\"app\",server=\"%s\"} %d\n", e.srv, st.H2Streams)
	if m := metrics(t, e.p); !strings.Contains(m, want) {
		t.Errorf("/metrics has no %q", want)
	}
	for _, l := range tot.Listeners {
		if l.H2Connections != e.clients || l.H2Streams < st.H2Streams {
			t.Errorf("listener totals: %d h2 connections, %d streams; want %d and at least the server's %d", l.H2Connections, l.H2Streams, e.clients, st.H2Streams)
		}
	}
}

// eventually reports whether cond held within 5s (polled).
func eventually(cond func() bool) bool {
	for range 250 {
		if cond() {
			return true
		}
		time.Sleep(20 * time.Millisecond)
	}
	return cond()
}

// metrics returns p's /metrics.
func metrics(t *testing.T, p *proxy.Proxy) string {
	t.Helper()
	c := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 10 * time.Second}
	resp, err := c.Get("http://" + p.AdminAddr().String() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// interopCase is one of grpc-go's interop client cases.
type interopCase struct {
	name string
	do   func(context.Context, testgrpc.TestServiceClient, ...grpc.CallOption)
}

// interopCases are the cases TestInterop runs, on e's connection.
func interopCases(e *env) []interopCase {
	unimplementedMethod := func(ctx context.Context, _ testgrpc.TestServiceClient, _ ...grpc.CallOption) {
		interop.DoUnimplementedMethod(ctx, e.cc)
	}
	return []interopCase{
		{name: "empty_unary", do: interop.DoEmptyUnaryCall},
		{name: "large_unary", do: interop.DoLargeUnaryCall},
		{name: "client_streaming", do: interop.DoClientStreaming},
		{name: "server_streaming", do: interop.DoServerStreaming},
		{name: "ping_pong", do: interop.DoPingPong},
		{name: "empty_stream", do: interop.DoEmptyStream},
		{name: "custom_metadata", do: interop.DoCustomMetadata},
		{name: "status_code_and_message", do: interop.DoStatusCodeAndMessage},
		{name: "special_status_message", do: interop.DoSpecialStatusMessage},
		{name: "unimplemented_method", do: unimplementedMethod},
		{name: "cancel_after_begin", do: interop.DoCancelAfterBegin},
		{name: "cancel_after_first_response", do: interop.DoCancelAfterFirstResponse},
		// Under load the server's reset at its deadline may reach the
		// client before the client's own deadline fires: it must be the
		// reset, DEADLINE_EXCEEDED (TestServerDeadlineReset).
		{name: "timeout_on_sleeping_server", do: interop.DoTimeoutOnSleepingServer},
	}
}

// TestInterop runs grpc-go's interop client cases (named as in gRPC's
// interop test descriptions) one after another on one client connection
// through the proxy, each a subtest after which the server's handlers
// have all ended (those of the cases that cancel too: the client's reset
// reached them), then checks that all went to the server as HTTP/2
// streams.
func TestInterop(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		e := start(t, b)
		for _, c := range interopCases(e) {
			t.Run(c.name, func(t *testing.T) {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				if err := catch(func() { c.do(ctx, e.tc) }); err != nil {
					t.Fatal(err)
				}
				if !eventually(func() bool { return e.seen.active.Load() == 0 }) {
					t.Fatalf("%d of the server's handlers still in progress after the case (a cancel did not reach the server?)", e.seen.active.Load())
				}
			})
		}
		if e.seen.canceled.Load() == 0 {
			t.Error("no handler at the server ended canceled: cancel_after_first_response's RST_STREAM did not reach it")
		}
		e.finish(t, 2) // cancel_after_begin, timeout_on_sleeping_server
	})
}

// TestConcurrent runs many RPCs at once on one client connection: 64
// Echo streams (distinct random messages of 16 KiB and up, each checked)
// that each wait, after their first reply, until all 64 are open, so
// that the proxy carries them all at once both ways, next to 64 of
// grpc-go's ping_pong and server_streaming cases (128 in all: more than
// the listener's 100 streams a connection, so grpc-go queues the rest
// under the proxy's SETTINGS). The server had the 64 in progress at once
// over fewer connections: the proxy multiplexed them.
func TestConcurrent(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		e := start(t, b)
		const held, others = 64, 64
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		var open sync.WaitGroup
		open.Add(held)
		allOpen := make(chan struct{})
		go func() {
			open.Wait()
			close(allOpen)
		}()
		ready := func() {
			open.Done()
			select {
			case <-allOpen:
			case <-ctx.Done():
			}
		}
		var wg sync.WaitGroup
		errc := make(chan error, held+others)
		for i := range held {
			wg.Go(func() {
				msgs := make([][]byte, 4)
				for j := range msgs {
					msgs[j] = random(uint64(i*len(msgs)+j), 16<<10+i*97+j)
				}
				if err := echo(ctx, e.cc, msgs, ready); err != nil {
					errc <- fmt.Errorf("echo %d: %w", i, err)
				}
			})
		}
		for i := range others {
			wg.Go(func() {
				do := interop.DoPingPong
				if i%2 == 1 {
					do = interop.DoServerStreaming
				}
				if err := catch(func() { do(ctx, e.tc) }); err != nil {
					errc <- fmt.Errorf("interop %d: %w", i, err)
				}
			})
		}
		wg.Wait()
		close(errc)
		for err := range errc {
			t.Error(err)
		}
		if t.Failed() {
			return
		}
		if peak, conns := e.seen.peak.Load(), e.seen.conns.Load(); peak < held || conns >= peak {
			t.Errorf("the server had at most %d RPCs in progress over %d connections, want %d or more over fewer", peak, conns, held)
		}
		e.finish(t, 0)
	})
}

// TestLargeMessage sends two 6 MiB messages each way on one Echo stream,
// larger than every flow-control window on the way (the proxy's 64 KiB a
// stream and 1 MiB a connection to the server, its listener's 64 KiB a
// stream, grpc-go's 64 KiB initial windows), then a unary call of 6 MiB
// each way.
func TestLargeMessage(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		e := start(t, b)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		const size = 6 << 20
		if err := echo(ctx, e.cc, [][]byte{random(1, size), random(2, size)}, nil); err != nil {
			t.Fatal(err)
		}
		reply, err := e.tc.UnaryCall(ctx, &testgrpc.SimpleRequest{
			ResponseType: testgrpc.PayloadType_COMPRESSABLE,
			ResponseSize: size,
			Payload:      interop.ClientNewPayload(testgrpc.PayloadType_COMPRESSABLE, size),
		})
		if err != nil {
			t.Fatal(err)
		}
		if n := len(reply.GetPayload().GetBody()); n != size {
			t.Fatalf("unary reply of %d bytes, want %d", n, size)
		}
		e.finish(t, 0)
	})
}

// TestServerGoAway: a gRPC server whose connections live 100ms
// (MaxConnectionAge: GOAWAY, then the connection ends once its RPCs did)
// while 4 clients on one connection each make 25 unary calls and 5
// ping_pong streams one after another through the proxy, so that RPCs
// are on their way as GOAWAYs come; each succeeds, over several of the
// proxy's connections to the server, and the proxy counted the GOAWAYs.
func TestServerGoAway(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		e := start(t, b, grpc.KeepaliveParams(keepalive.ServerParameters{
			MaxConnectionAge: 100 * time.Millisecond, MaxConnectionAgeGrace: 5 * time.Second,
		}))
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		var wg sync.WaitGroup
		errc := make(chan error, 4)
		for w := range 4 {
			wg.Go(func() {
				for i := range 25 {
					err := catch(func() {
						interop.DoEmptyUnaryCall(ctx, e.tc)
						if i%5 == 0 {
							interop.DoPingPong(ctx, e.tc)
						}
					})
					if err != nil {
						errc <- fmt.Errorf("client %d, call %d: %w", w, i, err)
						return
					}
					time.Sleep(10 * time.Millisecond)
				}
			})
		}
		wg.Wait()
		close(errc)
		for err := range errc {
			t.Error(err)
		}
		var goaways uint64
		for _, s := range e.p.Totals().Servers {
			goaways += s.H2GoAways
		}
		if conns := e.seen.conns.Load(); conns < 2 || goaways == 0 {
			t.Errorf("%d connections to the server, %d GOAWAYs: want 2 or more, and some", conns, goaways)
		}
		e.finish(t, 0)
	})
}

// TestServerDeadlineReset: a gRPC server ends a stream whose deadline
// (grpc-timeout) passed before its handler answered with RST_STREAM
// (CANCEL) and no response; grpc-go's client takes such a reset for
// DEADLINE_EXCEEDED once its own deadline passed (what
// timeout_on_sleeping_server expects when the server's reset comes
// first). Through the proxy the client must get that reset, as from the
// server itself, not a response the server did not send; and the
// server, which did what its client asked, is no failed exchange for
// passive health (http_errors 3: three such resets do not eject it, the
// next RPC succeeds). The client here is net/http's (HTTP/2, prior
// knowledge), sending a grpc-timeout of 50ms with no deadline of its own
// to Stall, so that the reset is what it sees.
func TestServerDeadlineReset(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		e := startProxy(t, b, func(cfg *proxy.Config) {
			cfg.Pools[0].Passive = &proxy.PassiveConfig{Fails: 1, Cooldown: proxy.Duration(time.Minute), HTTPErrors: 3}
		})
		var pr http.Protocols
		pr.SetUnencryptedHTTP2(true)
		tr := &http.Transport{Protocols: &pr}
		t.Cleanup(tr.CloseIdleConnections)
		e.clients++
		c := &http.Client{Transport: tr, Timeout: 10 * time.Second}
		for i := range 3 {
			body, w := io.Pipe()
			req, _ := http.NewRequest("POST", "http://"+e.p.Addr("grpc").String()+"/spindle.test.Peer/Stall", body)
			req.Header.Set("Content-Type", "application/grpc")
			req.Header.Set("TE", "trailers")
			req.Header.Set("Grpc-Timeout", "50m")
			resp, err := c.Do(req)
			w.Close()
			if err == nil {
				got, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				t.Fatalf("RPC %d: %s %q (grpc-status %q), want the server's RST_STREAM(CANCEL)", i, resp.Status, got, resp.Header.Get("Grpc-Status"))
			}
			if !strings.Contains(err.Error(), "CANCEL") {
				t.Fatalf("RPC %d: %v, want the server's RST_STREAM(CANCEL)", i, err)
			}
		}
		tr.CloseIdleConnections()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := catch(func() { interop.DoEmptyUnaryCall(ctx, e.tc) }); err != nil {
			t.Fatalf("after the resets: %v", err)
		}
		e.finish(t, 0)
	})
}
