package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"
)

// serveBare runs the bare relay on listen until SIGTERM or SIGINT: for each
// connection it reads a CONNECT head, dials the target, answers 200 and
// copies both ways with io.Copy (which splices between TCP sockets on
// Linux), one goroutine per direction. No authentication, no policy, no
// address checks, no limits, no audit: it is not a proxy anyone should run,
// only the floor, what a Go relay doing nothing else reaches on this
// machine. Beside it, the cost of everything ours does as a gateway shows,
// and a row where even the floor stays below a target is a row the machine
// bounds, not the proxy.
func serveBare(listen string) error {
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	go func() {
		<-ctx.Done()
		_ = ln.Close()
	}()
	fmt.Printf("ready %s\n", ln.Addr())
	for {
		c, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
				return nil
			}
			time.Sleep(5 * time.Millisecond) // out of descriptors, say: as net/http, wait and go on
			continue
		}
		go bareConn(c)
	}
}

// bareConn serves one connection of the bare relay.
func bareConn(c net.Conn) {
	defer c.Close()
	br := bufio.NewReader(c)
	req, err := http.ReadRequest(br)
	if err != nil || req.Method != http.MethodConnect || br.Buffered() > 0 {
		return // the harness sends a CONNECT and waits for the answer
	}
	t, err := net.Dial("tcp", req.Host)
	if err != nil {
		_, _ = io.WriteString(c, "HTTP/1.1 502 Bad Gateway\r\n\r\n")
		return
	}
	defer t.Close()
	if _, err := io.WriteString(c, "HTTP/1.1 200 Connection established\r\n\r\n"); err != nil {
		return
	}
	done := make(chan struct{})
	go func() {
		copyHalf(t, c)
		close(done)
	}()
	copyHalf(c, t)
	<-done
}

// copyHalf copies src to dst until src ends, then half-closes dst.
func copyHalf(dst, src net.Conn) {
	_, _ = io.Copy(dst, src)
	if tc, ok := dst.(*net.TCPConn); ok {
		_ = tc.CloseWrite()
	}
}
