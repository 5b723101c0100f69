package natsproto

import (
	"errors"
	"fmt"
	"testing"
)

func TestClientError(t *testing.T) {
	tests := []struct {
		err   error
		text  string
		close bool
	}{
		{ErrUnknownOp, "Unknown Protocol Operation", true},
		{ErrPayloadTerminator, "Unknown Protocol Operation", true},
		{ErrControlLineTooLong, "Maximum Control Line Exceeded", true},
		{ErrPayloadTooBig, "Maximum Payload Violation", true},
		{ErrBadArgs, "Parser Error", true},
		{ErrBadConnect, "Parser Error", true},
		{ErrInvalidProtocol, "Invalid Client Protocol", true},
		{ErrNoRespondersRequiresHeaders, "no responders requires headers support", true},
		{ErrInvalidSubject, "Invalid Subject", false},
		{ErrInvalidPublishSubject, "Invalid Publish Subject", false},
	}
	for _, tt := range tests {
		// The parser wraps sentinels; the mapping must see through that.
		wrapped := fmt.Errorf("conn 7: %w", tt.err)
		text, closeConn, ok := ClientError(wrapped)
		if !ok || text != tt.text || closeConn != tt.close {
			t.Errorf("ClientError(%v) = %q, %v, %v; want %q, %v, true", tt.err, text, closeConn, ok, tt.text, tt.close)
		}
	}
	if _, _, ok := ClientError(errors.New("disk full")); ok {
		t.Error("an unknown error is mapped")
	}
}

func TestParserErrorsMapToNATSWording(t *testing.T) {
	tests := []struct {
		in   string
		text string
	}{
		{"XYZ\r\n", "Unknown Protocol Operation"},
		{"PUB a 2000000\r\n", "Maximum Payload Violation"},
		{"SUB a\r\n", "Parser Error"},
		{"PUB a 1\r\nxx\r\n", "Unknown Protocol Operation"},
	}
	for _, tt := range tests {
		p, err := NewParser(DefaultLimits())
		if err != nil {
			t.Fatal(err)
		}
		if err := p.Feed([]byte(tt.in)); err != nil {
			t.Fatal(err)
		}
		_, _, perr := p.Next()
		text, closeConn, ok := ClientError(perr)
		if !ok || text != tt.text || !closeConn {
			t.Errorf("%q: ClientError(%v) = %q %v %v, want %q, close", tt.in, perr, text, closeConn, ok, tt.text)
		}
	}
}
