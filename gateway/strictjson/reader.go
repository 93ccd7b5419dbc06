package strictjson

import (
	"bytes"
	"errors"
	"io"
)

// bytesReader reads b: a *bytes.Buffer, which jsontext.Decoder parses in
// place instead of copying into buffers of its own (a 1 MB body cost 4 MB
// of allocations per Check through a bytes.Reader).
func bytesReader(b []byte) io.Reader { return bytes.NewBuffer(b) }

func isEOF(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF)
}
