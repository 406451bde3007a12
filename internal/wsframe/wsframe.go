// Package wsframe follows a WebSocket byte stream (RFC 6455) as it passes
// through a proxy and reports each message and control frame, without
// holding the stream: it keeps at most a frame header and a short prefix of
// each message's payload, whatever the messages' sizes.
package wsframe

import (
	"errors"
	"fmt"
)

// Opcodes (RFC 6455, 5.2).
const (
	OpContinuation byte = 0x0
	OpText         byte = 0x1
	OpBinary       byte = 0x2
	OpClose        byte = 0x8
	OpPing         byte = 0x9
	OpPong         byte = 0xA
)

// ErrProtocol means the stream is not WebSocket framing (or has lost
// step); a Reader reports nothing more after it.
var ErrProtocol = errors.New("not a WebSocket frame stream")

// Message is one complete data message (its fragments joined) or one
// control frame.
type Message struct {
	// Opcode is OpText or OpBinary for data messages, or the control
	// frame's opcode.
	Opcode byte
	// Length is the payload's length in bytes, over all fragments.
	Length int64
	// Compressed is true when the first frame had RSV1 set
	// (permessage-deflate): Prefix then holds compressed bytes.
	Compressed bool
	// Prefix is the first bytes of the payload, unmasked, up to the
	// Reader's PrefixLen. It is valid only during the OnMessage call.
	Prefix []byte
}

// IsControl reports a control frame (close, ping, pong).
func (m Message) IsControl() bool { return m.Opcode >= OpClose }

// Reader follows one direction of a WebSocket connection.
type Reader struct {
	// PrefixLen is how many payload bytes of each message to keep for
	// OnMessage (0: none; at most 4096).
	PrefixLen int
	// OnMessage is called at the end of each message and control frame.
	OnMessage func(Message)

	header    [14]byte
	headerLen int // bytes of the current header read so far
	remaining int64
	mask      [4]byte
	masked    bool
	maskPos   int
	opcode    byte // current frame's opcode
	fin       bool

	// The data message in progress, which control frames may interleave.
	inMessage  bool
	msg        Message
	prefix     []byte
	prefixFull bool

	err error
}

// Feed follows b, the next bytes of the stream. After the first error it
// returns that error and does nothing.
func (r *Reader) Feed(b []byte) error {
	for len(b) > 0 && r.err == nil {
		if !r.inPayload() {
			b = r.readHeader(b)
			continue
		}
		n := int64(len(b))
		if n > r.remaining {
			n = r.remaining
		}
		r.payload(b[:n])
		b = b[n:]
		r.remaining -= n
		if r.remaining == 0 {
			r.endFrame()
		}
	}
	return r.err
}

// AtFrameBoundary reports whether the bytes fed so far end exactly where a
// frame ends, so a proxy may put a control frame of its own there (RFC
// 6455 allows control frames between the fragments of a message). False
// once the stream has stopped parsing.
func (r *Reader) AtFrameBoundary() bool { return r.err == nil && r.headerLen == 0 }

// inPayload is true between a complete header and the end of its payload.
func (r *Reader) inPayload() bool { return r.headerLen < 0 }

// headerSize is the full header length given its first two bytes.
func headerSize(b1 byte) int {
	n := 2
	switch b1 & 0x7f {
	case 126:
		n += 2
	case 127:
		n += 8
	}
	if b1&0x80 != 0 {
		n += 4
	}
	return n
}

// readHeader consumes header bytes from b and returns the rest.
func (r *Reader) readHeader(b []byte) []byte {
	need := 2
	if r.headerLen >= 2 {
		need = headerSize(r.header[1])
	}
	for r.headerLen < need && len(b) > 0 {
		r.header[r.headerLen] = b[0]
		r.headerLen++
		b = b[1:]
		if r.headerLen == 2 {
			need = headerSize(r.header[1])
		}
	}
	if r.headerLen < need {
		return b
	}
	r.startFrame(need)
	return b
}

// startFrame checks a complete header and sets up its payload.
func (r *Reader) startFrame(size int) {
	h := r.header[:size]
	r.fin = h[0]&0x80 != 0
	r.opcode = h[0] & 0x0f
	r.masked = h[1]&0x80 != 0
	length := int64(h[1] & 0x7f)
	rest := h[2:]
	switch length {
	case 126:
		length = int64(rest[0])<<8 | int64(rest[1])
		rest = rest[2:]
	case 127:
		if rest[0]&0x80 != 0 {
			r.err = fmt.Errorf("%w: payload length over 2^63", ErrProtocol)
			return
		}
		length = 0
		for _, c := range rest[:8] {
			length = length<<8 | int64(c)
		}
		rest = rest[8:]
	}
	if r.masked {
		copy(r.mask[:], rest[:4])
	}
	r.maskPos = 0
	switch r.opcode {
	case OpClose, OpPing, OpPong:
		// At most 125 bytes, in the 7-bit length (RFC 6455 5.2 and 5.5):
		// an extended length, even of a small payload, is malformed.
		if !r.fin || h[1]&0x7f > 125 {
			r.err = fmt.Errorf("%w: fragmented or long control frame", ErrProtocol)
			return
		}
	case OpText, OpBinary:
		if r.inMessage {
			r.err = fmt.Errorf("%w: new message inside a fragmented one", ErrProtocol)
			return
		}
		r.inMessage = true
		r.msg = Message{Opcode: r.opcode, Compressed: h[0]&0x40 != 0}
		r.prefix, r.prefixFull = r.prefix[:0], false
	case OpContinuation:
		if !r.inMessage {
			r.err = fmt.Errorf("%w: continuation without a message", ErrProtocol)
			return
		}
	default:
		r.err = fmt.Errorf("%w: reserved opcode %#x", ErrProtocol, r.opcode)
		return
	}
	r.headerLen = -1 // in payload
	r.remaining = length
	if r.opcode < OpClose {
		r.msg.Length += length
	}
	if length == 0 {
		r.endFrame()
	}
}

// payload follows payload bytes of the current frame.
func (r *Reader) payload(b []byte) {
	if r.opcode >= OpClose {
		// Control payloads are at most 125 bytes; nobody needs them.
		r.maskPos += len(b)
		return
	}
	limit := min(r.PrefixLen, 4096)
	if !r.prefixFull && limit > 0 {
		take := min(len(b), limit-len(r.prefix))
		for i := range take {
			c := b[i]
			if r.masked {
				c ^= r.mask[(r.maskPos+i)&3]
			}
			r.prefix = append(r.prefix, c)
		}
		r.prefixFull = len(r.prefix) >= limit
	}
	r.maskPos += len(b)
}

// endFrame reports what the finished frame completed.
func (r *Reader) endFrame() {
	r.headerLen = 0
	switch {
	case r.opcode >= OpClose:
		r.report(Message{Opcode: r.opcode, Length: int64(r.header[1] & 0x7f)})
	case r.fin:
		r.msg.Prefix = r.prefix
		r.inMessage = false
		r.report(r.msg)
	}
}

func (r *Reader) report(m Message) {
	if r.OnMessage != nil {
		r.OnMessage(m)
	}
}
