package egress

import (
	"net"
	"testing"
	"time"
)

// Accepted connections unwrap to *net.TCPConn (so that a tunnel's relay
// can wait on the socket holding no buffer), and closing one gives its slot
// back.
func TestHeadListener(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hl := newHeadListener(ln, 1024, 1)
	defer hl.Close()
	accepted := make(chan net.Conn, 2)
	go func() {
		for {
			c, err := hl.Accept()
			if err != nil {
				return
			}
			accepted <- c
		}
	}()
	c1, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c1.Close()
	a1 := <-accepted
	if _, ok := rawConn(a1).(*net.TCPConn); !ok {
		t.Fatalf("rawConn = %T; want *net.TCPConn", rawConn(a1))
	}
	c2, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	select {
	case <-accepted:
		t.Fatal("a second connection was accepted with one slot")
	case <-time.After(200 * time.Millisecond):
	}
	// Closing the raw connection (as the relay does) and then the wrapper
	// (as the hijack handler does) frees the slot exactly once.
	_ = rawConn(a1).Close()
	_ = a1.Close()
	_ = a1.Close()
	select {
	case a2 := <-accepted:
		a2.Close()
	case <-time.After(5 * time.Second):
		t.Fatal("the slot was not released")
	}
}
