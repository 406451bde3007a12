package wsframe

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// frame encodes one frame as a browser (masked) or a server (unmasked)
// sends it.
func frame(fin bool, opcode byte, payload []byte, mask []byte) []byte {
	b0 := opcode
	if fin {
		b0 |= 0x80
	}
	out := []byte{b0}
	var m byte
	if mask != nil {
		m = 0x80
	}
	switch n := len(payload); {
	case n < 126:
		out = append(out, m|byte(n))
	case n < 1<<16:
		out = append(out, m|126)
		out = binary.BigEndian.AppendUint16(out, uint16(n))
	default:
		out = append(out, m|127)
		out = binary.BigEndian.AppendUint64(out, uint64(n))
	}
	if mask == nil {
		return append(out, payload...)
	}
	out = append(out, mask...)
	for i, c := range payload {
		out = append(out, c^mask[i%4])
	}
	return out
}

var key = []byte{0x37, 0xfa, 0x21, 0x3d}

type got struct {
	Opcode     byte
	Length     int64
	Compressed bool
	Prefix     string
}

// follow feeds stream in pieces of size step (0: all at once).
func follow(t *testing.T, stream []byte, prefixLen, step int) ([]got, error) {
	t.Helper()
	var out []got
	r := &Reader{PrefixLen: prefixLen, OnMessage: func(m Message) {
		out = append(out, got{m.Opcode, m.Length, m.Compressed, string(m.Prefix)})
	}}
	if step == 0 {
		return out, r.Feed(stream)
	}
	for len(stream) > 0 {
		n := min(step, len(stream))
		if err := r.Feed(stream[:n]); err != nil {
			return out, err
		}
		stream = stream[n:]
	}
	return out, nil
}

func TestReaderReportsMessagesAndControlFrames(t *testing.T) {
	t.Parallel()
	big := bytes.Repeat([]byte("x"), 70000)
	tests := []struct {
		name      string
		stream    [][]byte
		prefixLen int
		want      []got
	}{{
		name:   "masked text, as a browser sends it",
		stream: [][]byte{frame(true, OpText, []byte("print(1)"), key)},
		// No prefix asked for: none kept.
		want: []got{{Opcode: OpText, Length: 8}},
	}, {
		name:      "prefix unmasked and cut at PrefixLen",
		stream:    [][]byte{frame(true, OpBinary, []byte("remoteextensionsenvironment ping"), key)},
		prefixLen: 6,
		want:      []got{{Opcode: OpBinary, Length: 32, Prefix: "remote"}},
	}, {
		name:   "ping, pong and close are control frames",
		stream: [][]byte{frame(true, OpPing, []byte("hb"), key), frame(true, OpPong, nil, nil), frame(true, OpClose, []byte{3, 232}, key)},
		want:   []got{{Opcode: OpPing, Length: 2}, {Opcode: OpPong}, {Opcode: OpClose, Length: 2}},
	}, {
		name: "fragments are one message; a ping between them is reported on its own",
		stream: [][]byte{
			frame(false, OpText, []byte("hel"), key), frame(true, OpPing, nil, key),
			frame(false, OpContinuation, []byte("lo "), key), frame(true, OpContinuation, []byte("world"), key),
		},
		prefixLen: 64,
		want:      []got{{Opcode: OpPing}, {Opcode: OpText, Length: 11, Prefix: "hello world"}},
	}, {
		name:      "16-bit and 64-bit lengths",
		stream:    [][]byte{frame(true, OpBinary, big[:300], nil), frame(true, OpBinary, big, key)},
		prefixLen: 3,
		want:      []got{{Opcode: OpBinary, Length: 300, Prefix: "xxx"}, {Opcode: OpBinary, Length: 70000, Prefix: "xxx"}},
	}, {
		name:   "empty data message",
		stream: [][]byte{frame(true, OpText, nil, key)},
		want:   []got{{Opcode: OpText}},
	}, {
		name:      "compressed (RSV1) is flagged",
		stream:    [][]byte{append([]byte{0xC1}, frame(true, OpText, []byte("zz"), nil)[1:]...)},
		prefixLen: 8,
		want:      []got{{Opcode: OpText, Length: 2, Compressed: true, Prefix: "zz"}},
	}}
	for _, tt := range tests {
		stream := bytes.Join(tt.stream, nil)
		// Whole, and in every piece size a TCP read might deliver.
		for _, step := range []int{0, 1, 2, 3, 7, 13, 125, 4096} {
			out, err := follow(t, stream, tt.prefixLen, step)
			if err != nil {
				t.Fatalf("%s, pieces of %d: %v", tt.name, step, err)
			}
			if diff := cmp.Diff(tt.want, out); diff != "" {
				t.Errorf("%s, pieces of %d (-want +got):\n%s", tt.name, step, diff)
			}
		}
	}
}

func TestReaderRejectsWhatIsNotFraming(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		stream []byte
	}{
		{"reserved opcode", frame(true, 0x3, nil, nil)},
		{"fragmented ping", frame(false, OpPing, nil, key)},
		{"control frame over 125 bytes", frame(true, OpPong, bytes.Repeat([]byte("p"), 126), key)},
		{"continuation without a message", frame(true, OpContinuation, []byte("x"), key)},
		{"new message inside a fragmented one", append(frame(false, OpText, []byte("a"), key), frame(true, OpText, []byte("b"), key)...)},
		{"length over 2^63", []byte{0x82, 127, 0x80, 0, 0, 0, 0, 0, 0, 0}},
		{"an HTTP request", []byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n")},
	}
	for _, tt := range tests {
		r := &Reader{}
		err := r.Feed(tt.stream)
		if !errors.Is(err, ErrProtocol) {
			t.Errorf("%s: got %v, want ErrProtocol", tt.name, err)
		}
		// It stays failed: nothing more is reported.
		r.OnMessage = func(Message) { t.Errorf("%s: reported a message after failing", tt.name) }
		if err2 := r.Feed(frame(true, OpText, []byte("ok"), key)); !errors.Is(err2, ErrProtocol) {
			t.Errorf("%s: after failing, got %v", tt.name, err2)
		}
	}
}

// FuzzReader feeds arbitrary streams, whole and in pieces: the reader must
// never panic, must keep no more than PrefixLen bytes, and must report the
// same messages however the stream is cut.
func FuzzReader(f *testing.F) {
	f.Add(frame(true, OpText, []byte("hello"), key), 3)
	f.Add(append(frame(false, OpBinary, []byte("ab"), key), frame(true, OpContinuation, []byte("cd"), key)...), 1)
	f.Add([]byte{0x82, 127, 0x7f, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, 5)
	f.Add(frame(true, OpPing, nil, nil), 2)
	f.Fuzz(func(t *testing.T, stream []byte, step int) {
		if step <= 0 || step > len(stream)+1 {
			step = 1
		}
		whole, errWhole := follow(t, stream, 16, 0)
		pieces, errPieces := follow(t, stream, 16, step)
		if (errWhole == nil) != (errPieces == nil) {
			t.Fatalf("whole: %v; in pieces of %d: %v", errWhole, step, errPieces)
		}
		if diff := cmp.Diff(whole, pieces); diff != "" {
			t.Fatalf("pieces of %d report differently (-whole +pieces):\n%s", step, diff)
		}
		for _, m := range whole {
			if len(m.Prefix) > 16 {
				t.Fatalf("kept %d prefix bytes, limit 16", len(m.Prefix))
			}
			if m.Opcode >= OpClose && m.Length > 125 {
				t.Fatalf("control frame of %d bytes reported", m.Length)
			}
		}
	})
}

// BenchmarkReader follows a browser's stream of masked 1 KiB messages in
// 32 KiB reads, as the tunnel hands them over, keeping a 256-byte prefix.
func BenchmarkReader(b *testing.B) {
	msg := frame(true, OpBinary, bytes.Repeat([]byte("x"), 1024), key)
	stream := bytes.Repeat(msg, 32<<10/len(msg)) // whole frames, about 32 KiB
	var n int
	r := &Reader{PrefixLen: 256, OnMessage: func(Message) { n++ }}
	b.SetBytes(int64(len(stream)))
	b.ReportAllocs()
	for b.Loop() {
		if err := r.Feed(stream); err != nil {
			b.Fatal(err)
		}
	}
	if n == 0 {
		b.Fatal("no messages reported")
	}
}

// A proxy may insert its own close frame only where a frame ends, whatever
// the chunks the stream arrives in.
func TestAtFrameBoundary(t *testing.T) {
	t.Parallel()
	text := frame(true, OpText, []byte("hello"), nil)
	long := frame(true, OpBinary, make([]byte, 300), nil)
	fragment := frame(false, OpText, []byte("part"), nil)
	tests := []struct {
		name   string
		chunks [][]byte
		want   bool
	}{
		{"nothing yet", nil, true},
		{"a whole frame", [][]byte{text}, true},
		{"half a header", [][]byte{long[:3]}, false},
		{"header without payload", [][]byte{long[:4]}, false},
		{"payload in two chunks", [][]byte{long[:100], long[100:]}, true},
		{"between fragments of one message", [][]byte{fragment}, true},
		{"not WebSocket", [][]byte{[]byte("GET / HTTP/1.1\r\n")}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var r Reader
			for _, c := range tt.chunks {
				_ = r.Feed(c)
			}
			if got := r.AtFrameBoundary(); got != tt.want {
				t.Errorf("AtFrameBoundary() = %v, want %v", got, tt.want)
			}
		})
	}
}
