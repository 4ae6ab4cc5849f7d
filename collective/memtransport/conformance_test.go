package memtransport_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/gorovod/gorovod/collective"
	"github.com/gorovod/gorovod/collective/memtransport"
	"github.com/gorovod/gorovod/collective/transporttest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestConformance(t *testing.T) {
	transporttest.Run(t, func(t *testing.T, size int) []collective.Transport {
		return memtransport.NewNetwork(size).Transports()
	})
}
