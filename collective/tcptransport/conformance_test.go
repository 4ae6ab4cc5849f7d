package tcptransport

import (
	"context"
	"testing"
	"time"

	"github.com/gorovod/gorovod/collective"
	"github.com/gorovod/gorovod/collective/transporttest"
)

func TestConformance(t *testing.T) {
	transporttest.Run(t, func(t *testing.T, size int) []collective.Transport {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		m, err := LocalMesh(ctx, size, nil)
		if err != nil {
			t.Fatalf("LocalMesh(%d): %v", size, err)
		}
		return m
	})
}
