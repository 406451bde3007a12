package main

import (
	"os"
	"path/filepath"
	"testing"
)

// TestCopySelf: the copy is this binary, executable by every user (the
// pullers run it as nobody).
func TestCopySelf(t *testing.T) {
	to := filepath.Join(t.TempDir(), "userland")
	if err := copySelf(to); err != nil {
		t.Fatal(err)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	want, err := os.Stat(self)
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.Stat(to)
	if err != nil {
		t.Fatal(err)
	}
	if got.Size() != want.Size() || got.Mode().Perm()&0o005 != 0o005 {
		t.Errorf("copy: %d bytes, mode %v; want %d bytes, readable and executable by others", got.Size(), got.Mode(), want.Size())
	}
}
