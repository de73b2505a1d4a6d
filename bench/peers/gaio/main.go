// Command gaiobench reproduces github.com/xtaci/gaio's own echo benchmarks as a CLI
// that prints exactly one JSON object on stdout, so that ringio's networking
// workloads have a completion-style Go peer to be compared against.
//
// Cases:
//
//	echo64k  one connection streaming 64 KiB messages through an echo server
//	         (gaio's BenchmarkEcho64K: the client keeps one write and one read
//	         submitted, re-submitting each on completion) -> MB/s.
//	conns    N clients (8,192 by default) each write 1 KiB and read it back
//	         (gaio's Test8k) -> time to completion.
//	idle     RSS per idle connection with 10,000 connections: the server (this
//	         process) keeps one pending read per connection; the client ends
//	         live in a child process (this binary re-executed), so the figure
//	         is the server side only.
//
// --server gaio (default) uses a gaio Watcher echo loop; --server net uses plain
// Go net (one goroutine per connection) as a second reference.
// Every case runs under a hard timeout; on timeout or error the program prints a
// JSON object with "ok": false and exits with status 2 instead of hanging.
// All traffic is on 127.0.0.1.
package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/xtaci/gaio"
)

const gaioVersion = "v1.2.34"

type options struct {
	cas       string
	server    string
	quick     bool
	msgSize   int
	messages  int
	conns     int
	connSize  int
	idleConns int
	swapSize  int
	stock     bool
	timeout   time.Duration
}

type result map[string]any

var out = json.NewEncoder(os.Stdout)

// emit prints the one JSON object this program outputs.
var emitOnce sync.Once

func emit(v any, code int) {
	emitOnce.Do(func() {
		_ = out.Encode(v)
		os.Exit(code)
	})
	select {} // another goroutine is already exiting
}

func fail(opt *options, err error) {
	emit(result{
		"tool": "gaio", "gaio_version": gaioVersion, "ok": false,
		"case": opt.cas, "server": opt.server, "error": err.Error(),
	}, 2)
}

func main() {
	opt := &options{}
	flag.StringVar(&opt.cas, "case", "all", "echo64k | conns | idle | all")
	flag.StringVar(&opt.server, "server", "gaio", "echo server: gaio (Watcher loop) | net (goroutine per conn)")
	flag.BoolVar(&opt.quick, "quick", false, "small counts so that a run takes seconds")
	flag.IntVar(&opt.msgSize, "msgsize", 64*1024, "echo64k: message size in bytes")
	flag.IntVar(&opt.messages, "messages", 0, "echo64k: messages to echo (default 100000, quick 5000)")
	flag.IntVar(&opt.conns, "conns", 0, "conns: client connections (default 8192)")
	flag.IntVar(&opt.connSize, "connsize", 1024, "conns: bytes each client echoes")
	flag.IntVar(&opt.idleConns, "idle-conns", 0, "idle: connections (default 10000)")
	flag.IntVar(&opt.swapSize, "swap", 0, "conns: gaio swap buffer bytes (default conns*connsize, >= 64 KiB)")
	flag.BoolVar(&opt.stock, "stock", false,
		"conns: behave like gaio's own Test8k client (short reads not re-submitted; 64 KiB "+
			"swap buffer unless --swap): expected to hit the hard timeout on small machines")
	flag.DurationVar(&opt.timeout, "timeout", 0, "hard timeout per run (default 120s, quick 30s)")
	role := flag.String("role", "", "internal: idle-client")
	addr := flag.String("addr", "", "internal: address for -role idle-client")
	flag.Parse()

	if *role == "idle-client" {
		idleClient(*addr, opt.idleConns)
		return
	}
	applyDefaults(opt)
	if opt.server != "gaio" && opt.server != "net" {
		fail(opt, fmt.Errorf("unknown --server %q", opt.server))
	}
	if lim, err := raiseNofile(); err != nil {
		fail(opt, fmt.Errorf("raise RLIMIT_NOFILE: %w", err))
	} else {
		_ = lim
	}
	// Hard timeout: never hang, print an error object instead.
	time.AfterFunc(opt.timeout, func() {
		killChildren()
		fail(opt, fmt.Errorf("timeout after %s", opt.timeout))
	})

	cases := []string{opt.cas}
	if opt.cas == "all" {
		cases = []string{"echo64k", "conns", "idle"}
	}
	results := result{}
	for _, c := range cases {
		var r result
		var err error
		switch c {
		case "echo64k":
			r, err = runEcho64k(opt)
		case "conns":
			r, err = runConns(opt)
		case "idle":
			r, err = runIdle(opt)
		default:
			err = fmt.Errorf("unknown --case %q", c)
		}
		if err != nil {
			opt.cas = c
			killChildren()
			fail(opt, err)
		}
		results[c] = r
		runtime.GC()
	}
	emit(result{
		"tool": "gaio", "gaio_version": gaioVersion, "go_version": runtime.Version(),
		"gomaxprocs": runtime.GOMAXPROCS(0), "server": opt.server, "quick": opt.quick,
		"ok": true, "results": results,
	}, 0)
}

func applyDefaults(opt *options) {
	pick := func(v *int, full, quick int) {
		if *v <= 0 {
			if opt.quick {
				*v = quick
			} else {
				*v = full
			}
		}
	}
	pick(&opt.messages, 100000, 5000)
	pick(&opt.conns, 8192, 8192)
	pick(&opt.idleConns, 10000, 10000)
	if opt.timeout <= 0 {
		if opt.quick {
			opt.timeout = 30 * time.Second
		} else {
			opt.timeout = 120 * time.Second
		}
	}
}

func raiseNofile() (uint64, error) {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return 0, err
	}
	if lim.Cur < lim.Max {
		lim.Cur = lim.Max
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
			return 0, err
		}
	}
	return lim.Cur, nil
}

func nofile() uint64 {
	var lim syscall.Rlimit
	_ = syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim)
	return lim.Cur
}

// ---------------------------------------------------------------- servers

type echoServer struct {
	ln     net.Listener
	w      *gaio.Watcher
	closed atomic.Bool
}

func (s *echoServer) addr() string { return s.ln.Addr().String() }

func (s *echoServer) close() {
	s.closed.Store(true)
	_ = s.ln.Close()
	if s.w != nil {
		_ = s.w.Close()
	}
}

// startEcho starts an echo server on 127.0.0.1:0.
//
// gaio: one Watcher; every accepted connection gets its own buffer of bufSize
// bytes (nil when bufSize == 0: reads then use the watcher's shared swap
// buffer). Ping-pong per connection: read -> write what was read -> read again,
// so one buffer per connection suffices. (gaio's test server shares one write
// buffer between all connections, which corrupts data with several; we do not.)
//
// net: a goroutine per connection copying with a bufSize (min 1 KiB) buffer.
func startEcho(kind string, bufSize, swapSize int) (*echoServer, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s := &echoServer{ln: ln}
	if kind == "net" {
		if bufSize <= 0 {
			bufSize = 1024
		}
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				go func(c net.Conn) {
					defer c.Close()
					buf := make([]byte, bufSize)
					for {
						n, err := c.Read(buf)
						if n > 0 {
							if _, werr := c.Write(buf[:n]); werr != nil {
								return
							}
						}
						if err != nil {
							return
						}
					}
				}(c)
			}
		}()
		return s, nil
	}

	if swapSize <= 0 {
		swapSize = 64 * 1024
	}
	w, err := gaio.NewWatcherSize(swapSize)
	if err != nil {
		_ = ln.Close()
		return nil, err
	}
	s.w = w
	go func() {
		for {
			results, err := w.WaitIO()
			if err != nil {
				return
			}
			for _, res := range results {
				// ctx carries the connection's own buffer (nil: swap buffer).
				own, _ := res.Context.([]byte)
				switch res.Operation {
				case gaio.OpRead:
					if res.Error != nil || res.Size == 0 {
						_ = w.Free(res.Conn)
						continue
					}
					data := res.Buffer[:res.Size]
					if own == nil {
						// swap buffer contents are only valid until the next
						// WaitIO: copy before handing them to an async write.
						data = append([]byte(nil), data...)
					}
					_ = w.Write(own, res.Conn, data)
				case gaio.OpWrite:
					if res.Error != nil {
						_ = w.Free(res.Conn)
						continue
					}
					_ = w.Read(own, res.Conn, own)
				}
			}
		}
	}()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			var buf []byte
			if bufSize > 0 {
				buf = make([]byte, bufSize)
			}
			if err := w.Read(buf, c, buf); err != nil {
				_ = c.Close()
				return
			}
		}
	}()
	return s, nil
}

// ---------------------------------------------------------------- echo64k

func runEcho64k(opt *options) (result, error) {
	size := opt.msgSize
	srv, err := startEcho(opt.server, size, 0)
	if err != nil {
		return nil, err
	}
	defer srv.close()

	w, err := gaio.NewWatcher()
	if err != nil {
		return nil, err
	}
	defer w.Close()
	conn, err := net.Dial("tcp", srv.addr())
	if err != nil {
		return nil, err
	}

	tx := make([]byte, size)
	for i := range tx {
		tx[i] = byte(i)
	}
	rx := make([]byte, size)
	target := int64(size) * int64(opt.messages)
	var written, read int64
	start := time.Now()
	if err := w.Write(nil, conn, tx); err != nil {
		return nil, err
	}
	if err := w.Read(nil, conn, rx); err != nil {
		return nil, err
	}
	for read < target {
		results, err := w.WaitIO()
		if err != nil {
			return nil, err
		}
		for _, res := range results {
			if res.Error != nil {
				return nil, fmt.Errorf("client %v: %w", res.Operation, res.Error)
			}
			switch res.Operation {
			case gaio.OpWrite:
				written += int64(res.Size)
				if written < target {
					_ = w.Write(nil, conn, tx)
				}
			case gaio.OpRead:
				// Count the bytes actually received (gaio's benchmark counts
				// one full buffer per read completion, which over-counts).
				read += int64(res.Size)
				if read < target {
					_ = w.Read(nil, conn, rx)
				}
			}
		}
	}
	elapsed := time.Since(start).Seconds()
	_ = w.Free(conn)
	return result{
		"messages": opt.messages, "msg_size": size, "bytes": read,
		"seconds": elapsed, "mb_per_s": float64(read) / elapsed / 1e6,
		"mib_per_s": float64(read) / elapsed / (1 << 20),
		"client":    "gaio Watcher in the same process, one write and one read kept submitted",
	}, nil
}

// ---------------------------------------------------------------- conns

func runConns(opt *options) (result, error) {
	n, size := opt.conns, opt.connSize
	// gaio's own Test1k..Test10k hang on a 2-core machine: the client reads with
	// nil buffers into the watcher's 64 KiB swap buffer; once it fills, reads
	// fall back to the 16-byte per-request buffer, return 16 bytes and the test
	// never re-submits them, so the byte total is never reached. We (1) give the
	// client watcher a swap buffer big enough for every reply (conns*connsize,
	// at least 64 KiB, or --swap) via gaio.NewWatcherSize, and (2) re-submit the
	// read until each connection has its whole reply, so short reads are fine.
	// --stock keeps gaio's behaviour (64 KiB swap buffer, no re-submission) to
	// show the hang; the hard timeout then turns it into an error object.
	swap := opt.swapSize
	if opt.stock && swap <= 0 {
		swap = 64 * 1024
	} else if swap <= 0 {
		swap = n * size
		if swap < 64*1024 {
			swap = 64 * 1024
		}
	}
	var total int64
	srv, err := startEcho(opt.server, size, 0)
	if err != nil {
		return nil, err
	}
	defer srv.close()
	w, err := gaio.NewWatcherSize(swap)
	if err != nil {
		return nil, err
	}
	defer w.Close()

	type state struct{ got int }
	dialErr := make(chan error, 1)
	start := time.Now()
	go func() {
		data := make([]byte, size)
		for i := 0; i < n; i++ {
			c, err := net.Dial("tcp", srv.addr())
			if err != nil {
				dialErr <- fmt.Errorf("dial #%d: %w", i, err)
				_ = w.Close() // unblock WaitIO
				return
			}
			if err := w.Write(&state{}, c, data); err != nil {
				dialErr <- err
				_ = w.Close()
				return
			}
		}
		dialErr <- nil
	}()

	done, failed := 0, 0
	dialDone := false
	for done+failed < n {
		if !dialDone {
			select {
			case err := <-dialErr:
				if err != nil {
					return nil, err
				}
				dialDone = true
			default:
			}
		}
		results, err := w.WaitIO()
		if err != nil {
			select {
			case derr := <-dialErr:
				if derr != nil {
					return nil, derr
				}
			default:
			}
			return nil, err
		}
		for _, res := range results {
			st := res.Context.(*state)
			if res.Error != nil {
				failed++
				_ = w.Free(res.Conn)
				continue
			}
			switch res.Operation {
			case gaio.OpWrite:
				_ = w.Read(st, res.Conn, nil)
			case gaio.OpRead:
				st.got += res.Size
				if opt.stock {
					// gaio's Test8k: count bytes over all connections, never re-read
					total += int64(res.Size)
					if total >= int64(n)*int64(size) {
						done = n
					}
					continue
				}
				if st.got >= size {
					done++
					_ = w.Free(res.Conn)
				} else {
					_ = w.Read(st, res.Conn, nil)
				}
			}
		}
	}
	elapsed := time.Since(start).Seconds()
	if failed > 0 {
		return nil, fmt.Errorf("%d of %d connections failed", failed, n)
	}
	client := "gaio Watcher in the same process; dial, write, read until full reply"
	if opt.stock {
		client = "gaio Watcher in the same process; gaio Test8k style (no re-read, byte total)"
	}
	return result{
		"conns": n, "msg_size": size, "seconds": elapsed,
		"conns_per_s": float64(n) / elapsed, "swap_buffer": swap, "stock": opt.stock,
		"client": client,
		"nofile": nofile(),
	}, nil
}

// ---------------------------------------------------------------- idle

var children struct {
	sync.Mutex
	cmds []*exec.Cmd
}

func killChildren() {
	children.Lock()
	defer children.Unlock()
	for _, c := range children.cmds {
		if c.Process != nil {
			_ = c.Process.Kill()
		}
	}
}

func rssKiB() (int64, error) {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "VmRSS:") {
			f := strings.Fields(line)
			if len(f) >= 2 {
				return strconv.ParseInt(f[1], 10, 64)
			}
		}
	}
	return 0, errors.New("VmRSS not found")
}

func runIdle(opt *options) (result, error) {
	n := opt.idleConns
	if uint64(n)+64 > nofile() {
		return nil, fmt.Errorf("idle: %d connections need more than RLIMIT_NOFILE %d", n, nofile())
	}
	// gaio: pending nil-buffer reads (the shared swap buffer is used when data
	// arrives, so an idle connection owns no buffer). net: one goroutine per
	// connection blocked in Read with its own 1 KiB buffer.
	bufSize := 0
	if opt.server == "net" {
		bufSize = 1024
	}
	runtime.GC()
	debug.FreeOSMemory()
	before, err := rssKiB()
	if err != nil {
		return nil, err
	}
	srv, err := startEcho(opt.server, bufSize, 0)
	if err != nil {
		return nil, err
	}
	defer srv.close()
	afterListen, _ := rssKiB()

	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(exe, "-role", "idle-client", "-addr", srv.addr(),
		"-idle-conns", strconv.Itoa(n))
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	cmd.Stderr = os.Stderr
	children.Lock()
	children.cmds = append(children.cmds, cmd)
	children.Unlock()
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	defer func() {
		_ = stdin.Close()
		_ = cmd.Wait()
	}()
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		return nil, fmt.Errorf("idle client: %w (got %q)", err, line)
	}
	if strings.TrimSpace(line) != "ready" {
		return nil, fmt.Errorf("idle client: %s", strings.TrimSpace(line))
	}
	// Wait until the server has taken every connection in (fd count).
	deadline := time.Now().Add(opt.timeout)
	for countFds() < n && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(200 * time.Millisecond) // let pending submissions settle
	runtime.GC()
	after, err := rssKiB()
	if err != nil {
		return nil, err
	}
	delta := after - afterListen
	return result{
		"conns": n, "rss_before_kib": before, "rss_after_listen_kib": afterListen,
		"rss_after_kib": after, "rss_delta_kib": delta,
		"rss_per_conn_bytes": float64(delta) * 1024 / float64(n),
		"placement":          "server ends in this process (measured); client ends in a child process",
		"server_read_buffer": bufSize,
		"server_fds":         countFds(),
	}, nil
}

func countFds() int {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return 0
	}
	return len(ents)
}

// idleClient dials n connections, prints "ready", and holds them until stdin closes.
func idleClient(addr string, n int) {
	if _, err := raiseNofile(); err != nil {
		fmt.Printf("error: %v\n", err)
		os.Exit(2)
	}
	conns := make([]net.Conn, 0, n)
	for i := 0; i < n; i++ {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			fmt.Printf("error: dial #%d: %v\n", i, err)
			os.Exit(2)
		}
		conns = append(conns, c)
	}
	fmt.Println("ready")
	_, _ = io.Copy(io.Discard, os.Stdin)
	for _, c := range conns {
		_ = c.Close()
	}
}
