package main

import (
	"bytes"
	"testing"

	"github.com/userland-dev/userland/internal/wsframe"
)

// frameReaderResult is what following a browser's WebSocket stream costs
// the gateway: the frame reader over masked 1 KiB messages in the 32 KiB
// reads the tunnel hands it, keeping the 256-byte prefix content rules
// need (the most it ever reads of a message).
type frameReaderResult struct {
	MBPerSec       float64
	AllocsPerRead  int64
	NsPer32KiBRead int64
}

func measureFrameReader() frameReaderResult {
	payload := bytes.Repeat([]byte("x"), 1024)
	mask := []byte{0x37, 0xfa, 0x21, 0x3d}
	msg := []byte{0x82, 0x80 | 126, 0x04, 0x00}
	msg = append(msg, mask...)
	for i, c := range payload {
		msg = append(msg, c^mask[i%4])
	}
	stream := bytes.Repeat(msg, 32<<10/len(msg))
	r := &wsframe.Reader{PrefixLen: 256, OnMessage: func(wsframe.Message) {}}
	res := testing.Benchmark(func(b *testing.B) {
		b.SetBytes(int64(len(stream)))
		b.ReportAllocs()
		for b.Loop() {
			if err := r.Feed(stream); err != nil {
				b.Fatal(err)
			}
		}
	})
	return frameReaderResult{
		MBPerSec:       float64(res.Bytes) * float64(res.N) / res.T.Seconds() / 1e6,
		AllocsPerRead:  res.AllocsPerOp(),
		NsPer32KiBRead: res.NsPerOp(),
	}
}
