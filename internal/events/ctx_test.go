package events

import (
	"context"
	"net/netip"
	"time"
)

func contextWithTimeout(d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), d)
}

func netipMust(s string) netip.Addr { return netip.MustParseAddr(s) }
