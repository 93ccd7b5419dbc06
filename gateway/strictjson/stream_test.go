package strictjson

import (
	"bytes"
	"errors"
	"io"
	"strconv"
	"testing"
	"testing/iotest"
)

// endless is `{"k0":1,"k1":1,...` for ever: only a check made while
// reading ends it.
type endless struct {
	i       int
	pending []byte
	read    int
}

func (e *endless) Read(p []byte) (int, error) {
	if len(e.pending) == 0 {
		if e.i == 0 {
			e.pending = append(e.pending, '{')
		} else {
			e.pending = append(e.pending, ',')
		}
		e.pending = append(e.pending, `"k`+strconv.Itoa(e.i)+`":1`...)
		e.i++
	}
	n := copy(p, e.pending)
	e.pending = e.pending[n:]
	e.read += n
	return n, nil
}

func TestReadCheckedStopsAtTheLimit(t *testing.T) {
	tests := []struct {
		name string
		lim  Limits
	}{
		{name: "members", lim: Limits{MaxMembers: 1000, MaxBytes: 1 << 30}},
		{name: "bytes", lim: Limits{MaxMembers: -1, MaxBytes: 64 << 10}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src := &endless{}
			_, err := ReadChecked(src, tt.lim)
			if !errors.Is(err, ErrRefused) {
				t.Fatalf("err = %v, want a refusal", err)
			}
			if src.read > 128<<10 {
				t.Fatalf("read %d bytes before refusing", src.read)
			}
		})
	}
}

func TestReadCheckedReadError(t *testing.T) {
	boom := errors.New("boom")
	_, err := ReadChecked(io.MultiReader(bytes.NewReader([]byte(`{"a":`)), iotest.ErrReader(boom)), Limits{})
	if !errors.Is(err, boom) || errors.Is(err, ErrRefused) {
		t.Fatalf("err = %v, want the read error, not a refusal", err)
	}
}

// FuzzReadCheckedMatchesCheck: reading a body a byte at a time with
// ReadChecked accepts and refuses exactly what Check does on the bytes,
// and returns the bytes.
func FuzzReadCheckedMatchesCheck(f *testing.F) {
	for _, s := range []string{`{}`, ` {"a":[1,2,{"b":null}]} `, `{"a":1,"a":2}`, `[1,2] x`, `{"a":"\ud800"}`, "\"\xff\"", `{"a":{"b":{"c":{}}}}`, `[` + string(bytes.Repeat([]byte("1,"), 20)) + `1]`} {
		f.Add([]byte(s))
	}
	lim := Limits{MaxBytes: 256, MaxDepth: 3, MaxMembers: 8, MaxElements: 16, MaxString: 32}
	f.Fuzz(func(t *testing.T, data []byte) {
		want := Check(data, lim)
		got, err := ReadChecked(iotest.OneByteReader(bytes.NewReader(data)), lim)
		if (err == nil) != (want == nil) {
			t.Fatalf("ReadChecked: %v; Check: %v", err, want)
		}
		if err == nil && !bytes.Equal(got, data) {
			t.Fatalf("returned %q, read %q", got, data)
		}
		if err != nil && !errors.Is(err, ErrRefused) {
			t.Fatalf("not a refusal: %v", err)
		}
	})
}
