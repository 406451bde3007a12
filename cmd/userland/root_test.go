package main

import (
	"bytes"
	"runtime"
	"strings"
	"testing"
)

func TestVersionCommandPrintsVersionCommitAndGo(t *testing.T) {
	cmd := newRootCommand()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetArgs([]string{"version"})
	if err := cmd.Execute(); err != nil {
		t.Fatalf("version: %v", err)
	}
	got := out.String()
	for _, want := range []string{"userland ", "commit ", runtime.Version()} {
		if !strings.Contains(got, want) {
			t.Errorf("version output %q does not contain %q", got, want)
		}
	}
}

func TestVersionCommandRejectsArguments(t *testing.T) {
	cmd := newRootCommand()
	cmd.SetOut(&bytes.Buffer{})
	cmd.SetErr(&bytes.Buffer{})
	cmd.SetArgs([]string{"version", "extra"})
	if err := cmd.Execute(); err == nil {
		t.Fatal("version with an argument succeeded, want an error")
	}
}
