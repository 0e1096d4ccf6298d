package jvmattach

import (
	"errors"
	"testing"
)

func TestRequest(t *testing.T) {
	if got, want := Request("Compiler.perfmap"), "1\x00jcmd\x00Compiler.perfmap\x00\x00\x00"; got != want {
		t.Errorf("Request = %q, want %q", got, want)
	}
}

func TestParseReply(t *testing.T) {
	tests := []struct {
		reply, out string
		refused    bool
		bad        bool
	}{
		{reply: "0\n", out: ""},
		{reply: "0\nsome output\nmore\n", out: "some output\nmore\n"},
		{reply: "101\nProtocol mismatch\n", out: "Protocol mismatch\n", refused: true},
		{reply: "", bad: true},
		{reply: "garbage", bad: true},
	}
	for _, tt := range tests {
		out, err := ParseReply(tt.reply)
		switch {
		case tt.bad:
			if err == nil || errors.Is(err, ErrRefused) {
				t.Errorf("%q: err %v, want a bad reply", tt.reply, err)
			}
		case tt.refused:
			if !errors.Is(err, ErrRefused) || out != tt.out {
				t.Errorf("%q: %q, %v; want %q refused", tt.reply, out, err, tt.out)
			}
		default:
			if err != nil || out != tt.out {
				t.Errorf("%q: %q, %v; want %q", tt.reply, out, err, tt.out)
			}
		}
	}
}
