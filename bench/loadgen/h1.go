package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"sync"
	"syscall"
	"time"
)

// h1Pool sends HTTP/1.1 requests over at most max keep-alive TLS
// connections, each driven by one goroutine that writes a request and reads
// its answer. net/http's client did the same work with two goroutines per
// connection, a goroutine per request and hand-offs between them: about
// 0.4 ms of CPU per 36 KB review, four times what oha needs, taken from the
// two cores the gateway under test runs on.
//
// Like net/http's pool (and the API server's webhook client) it reuses the
// most recently idle connection, opens another only when all are busy, and
// queues requests in order once max are open.
type h1Pool struct {
	addr, header string
	tlsConf      *tls.Config
	max          int

	mu      sync.Mutex
	idle    []*h1Conn
	queue   []func(*h1Conn)
	open    int
	closing bool
	wg      sync.WaitGroup
}

type h1Conn struct {
	pool  *h1Pool
	conn  *tls.Conn
	br    *bufio.Reader
	req   []byte
	resp  bytes.Buffer
	jobs  chan func(*h1Conn)
	fresh bool // conn was dialled for the request in flight
}

func newH1Pool(addr, host, path string, tlsConf *tls.Config, max int) *h1Pool {
	return &h1Pool{
		addr: addr, tlsConf: tlsConf, max: max,
		header: "POST " + path + " HTTP/1.1\r\nHost: " + host +
			"\r\nContent-Type: application/json\r\nAccept: application/json\r\nContent-Length: ",
	}
}

// submit runs job on a connection now, or as soon as one is free; it never
// blocks the pacer.
func (p *h1Pool) submit(job func(*h1Conn)) {
	p.mu.Lock()
	if n := len(p.idle); n > 0 {
		c := p.idle[n-1]
		p.idle = p.idle[:n-1]
		p.mu.Unlock()
		c.jobs <- job
		return
	}
	if p.open < p.max {
		p.open++
		p.wg.Add(1)
		p.mu.Unlock()
		c := &h1Conn{pool: p, jobs: make(chan func(*h1Conn), 1)}
		go c.work(job)
		return
	}
	p.queue = append(p.queue, job)
	p.mu.Unlock()
}

// wait lets queued and running jobs finish, then closes every connection.
func (p *h1Pool) wait() {
	p.mu.Lock()
	p.closing = true
	for _, c := range p.idle {
		close(c.jobs)
	}
	p.idle = nil
	p.mu.Unlock()
	p.wg.Wait()
}

func (c *h1Conn) work(job func(*h1Conn)) {
	p := c.pool
	defer p.wg.Done()
	defer c.close()
	for {
		job(c)
		p.mu.Lock()
		if len(p.queue) > 0 {
			job = p.queue[0]
			p.queue[0] = nil
			p.queue = p.queue[1:]
			p.mu.Unlock()
			continue
		}
		if p.closing {
			p.mu.Unlock()
			return
		}
		p.idle = append(p.idle, c)
		p.mu.Unlock()
		var ok bool
		if job, ok = <-c.jobs; !ok {
			return
		}
	}
}

// request starts the reusable request buffer with the headers for a body of
// n bytes; the caller appends the body.
func (c *h1Conn) request(n int) []byte {
	c.req = append(c.req[:0], c.pool.header...)
	c.req = appendInt(c.req, n)
	return append(c.req, "\r\n\r\n"...)
}

func appendInt(b []byte, n int) []byte {
	var d [20]byte
	i := len(d)
	for {
		i--
		d[i] = byte('0' + n%10)
		if n /= 10; n == 0 {
			break
		}
	}
	return append(b, d[i:]...)
}

type dialError struct{ err error }

func (e dialError) Error() string { return "connect: " + e.err.Error() }
func (e dialError) Unwrap() error { return e.err }

// roundTrip writes req and reads the whole answer by deadline. The body it
// returns is valid until the next call. A kept-alive connection the server
// had closed while idle fails before any answer: that is retried once on a
// new connection, as net/http does, rather than counted as the server's error.
func (c *h1Conn) roundTrip(req []byte, deadline time.Time) (status int, body []byte, err error) {
	for attempt := 0; ; attempt++ {
		status, body, err = c.try(req, deadline)
		if err == nil || c.fresh || attempt > 0 || !closedIdle(err) {
			return status, body, err
		}
	}
}

func (c *h1Conn) try(req []byte, deadline time.Time) (int, []byte, error) {
	c.fresh = false
	if c.conn == nil {
		if err := c.dial(deadline); err != nil {
			return 0, nil, err
		}
		c.fresh = true
	}
	c.conn.SetDeadline(deadline)
	if _, err := c.conn.Write(req); err != nil {
		c.close()
		return 0, nil, err
	}
	// Wait for the first byte here: ReadResponse turns a connection closed
	// before any answer into ErrUnexpectedEOF, hiding the closed idle case.
	if _, err := c.br.Peek(1); err != nil {
		c.close()
		return 0, nil, err
	}
	resp, err := http.ReadResponse(c.br, nil)
	if err != nil {
		c.close()
		return 0, nil, err
	}
	c.resp.Reset()
	_, err = c.resp.ReadFrom(resp.Body)
	resp.Body.Close()
	if err != nil || resp.Close {
		c.close()
	}
	if err != nil {
		return 0, nil, err
	}
	return resp.StatusCode, c.resp.Bytes(), nil
}

func (c *h1Conn) dial(deadline time.Time) error {
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	raw, err := (&net.Dialer{}).DialContext(ctx, "tcp", c.pool.addr)
	if err != nil {
		return dialError{err}
	}
	conn := tls.Client(raw, c.pool.tlsConf)
	if err := conn.HandshakeContext(ctx); err != nil {
		raw.Close()
		return err
	}
	c.conn = conn
	if c.br == nil {
		c.br = bufio.NewReaderSize(nil, 16<<10)
	}
	c.br.Reset(conn)
	return nil
}

func (c *h1Conn) close() {
	if c.conn != nil {
		c.conn.Close()
		c.conn = nil
	}
}

// closedIdle: the connection was gone before the server answered a byte.
func closedIdle(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}
